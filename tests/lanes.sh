#!/bin/sh
# tests/lanes.sh CMD... - runs independent test commands (each a `sh -c` string) on $LANES lanes at once
# (default: the CPUs online), each lane taking the next command when it is free, and prints every
# command's output in the order given, each as soon as it and the ones before it are done. Suites that run
# ptxas one config at a time use one core; side by side they use the machine. Exit 1 when any failed.
set -u
n=$#
lanes=${LANES:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}
[ "$lanes" -ge 1 ] 2>/dev/null || lanes=1
[ "$lanes" -le "$n" ] || lanes=$n
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
i=0
for cmd in "$@"; do
    printf '%s\n' "$cmd" > "$d/cmd.$i"
    i=$((i + 1))
done
echo 0 > "$d/next"
# take: the index of the next command (a mkdir lock guards the counter)
take() {
    while ! mkdir "$d/lock" 2>/dev/null; do sleep 0.05; done
    k=$(cat "$d/next"); echo $((k + 1)) > "$d/next"
    rmdir "$d/lock"
    echo "$k"
}
lane() {
    while :; do
        k=$(take)
        [ "$k" -lt "$n" ] || return 0
        t0=$(date +%s)
        sh -c "$(cat "$d/cmd.$k")" > "$d/out.$k" 2>&1
        echo "$? $(( $(date +%s) - t0 ))" > "$d/rc.$k.tmp" && mv "$d/rc.$k.tmp" "$d/rc.$k"
    done
}
echo "lanes: $n commands on $lanes lanes (each one's output follows, in order, once it is done)"
l=0
while [ "$l" -lt "$lanes" ]; do
    lane &
    l=$((l + 1))
done
rc=0
k=0
while [ "$k" -lt "$n" ]; do
    while [ ! -f "$d/rc.$k" ]; do sleep 1; done
    cat "$d/out.$k"
    set -- $(cat "$d/rc.$k")
    if [ "$1" -ne 0 ]; then
        echo "lanes: FAILED (exit $1, ${2}s): $(cat "$d/cmd.$k")"
        rc=1
    else
        echo "lanes: ${2}s: $(sed 's/^.* sh tests/sh tests/' "$d/cmd.$k")"
    fi
    k=$((k + 1))
done
wait
exit $rc
