#!/bin/sh
# Runs each libFuzzer binary given for $FUZZ_SECONDS (default 60) on a
# corpus seeded from fuzz/corpus/NAME (and, for the pack fuzzer, the real
# packs). Fails as soon as one target finds a crash, leak or UB.
set -eu
seconds=${FUZZ_SECONDS:-60}
root=${KEEL_ROOT:-.}
status=0
for bin in "$@"; do
    name=$(basename "$bin" | sed 's/^fuzz_//')
    work="$(dirname "$bin")/corpus-$name"
    mkdir -p "$work"
    if [ -d "$root/fuzz/corpus/$name" ]; then
        cp "$root/fuzz/corpus/$name"/* "$work"/ 2>/dev/null || true
    fi
    if [ "$name" = pack ]; then
        for p in "$root"/packs/*/pack.yaml; do
            # the first byte selects YAML (even) before the pack text
            { printf 'Y'; cat "$p"; } > "$work/seed-$(basename "$(dirname "$p")")"
        done
    fi
    echo "fuzz: $name for ${seconds}s"
    if ! "$bin" -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048 \
            -print_final_stats=1 "$work" > "$work.log" 2>&1; then
        echo "fuzz: $name FAILED — see $work.log"
        tail -n 40 "$work.log"
        status=1
    else
        grep -E 'stat::number_of_executed_units|Done ' "$work.log" | tail -n 2
    fi
done
exit $status
