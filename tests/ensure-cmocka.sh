#!/bin/sh
# Installs cmocka (Debian libcmocka-dev) when it is missing and we are allowed to.
if pkg-config --exists cmocka 2>/dev/null || [ -f /usr/include/cmocka.h ]; then exit 0; fi
echo "cmocka is missing; installing libcmocka-dev" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
if command -v apt-get >/dev/null 2>&1; then
    $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q libcmocka-dev >/dev/null && exit 0
fi
echo "error: cmocka not found and could not be installed; install libcmocka-dev (Debian/Ubuntu) or cmocka" >&2
exit 1
