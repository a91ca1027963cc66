#!/bin/sh
# Black-box tests: run the real keel binary ($KEEL) as a user would and
# check its output and exit codes. Each tests/blackbox/t_*.sh file defines
# test_* functions; every function is one test. Ends with the line
# "blackbox: N passed, N failed" and exits 1 on any failure. A test whose
# output starts with "skipped: REASON" passed without running (a tool or
# ../shared/data is missing): it is listed and counted apart.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
KEEL=${KEEL:-$root/build/keel}
export KEEL root
export KEEL_PACKS="$root/packs"
unset KEEL_NOW
TMP=$(mktemp -d)
export TMP
trap 'rm -rf "$TMP"' EXIT INT TERM

if ! command -v jq >/dev/null 2>&1; then
    echo "blackbox: jq is required (scripts/install-deps installs it)" >&2
    exit 1
fi
if [ ! -x "$KEEL" ]; then
    echo "blackbox: no keel binary at $KEEL (run make first)" >&2
    exit 1
fi

. "$here/lib.sh"

passed=0
skipped=0
failed=0
for file in "$here"/t_*.sh; do
    # BLACKBOX_ONLY=t_llm runs one file's tests (while working on it).
    case "$(basename "$file" .sh)" in ${BLACKBOX_ONLY:-*}) ;; *) continue ;; esac
    . "$file"
    for t in $(grep -o '^test_[a-z0-9_]*' "$file"); do
        # Not inside `if`: the shell ignores set -e there, and then only a
        # test's last check would count.
        ( set -e; cd "$TMP"; "$t" ) > "$TMP/out.$t" 2>&1
        status=$?
        reason=$(sed -n '1s/^skipped: //p' "$TMP/out.$t")
        if [ "$status" -eq 0 ] && [ -n "$reason" ]; then
            skipped=$((skipped + 1))
            echo "SKIP $(basename "$file") $t: $reason"
        elif [ "$status" -eq 0 ]; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1))
            echo "FAIL $(basename "$file") $t"
            sed 's/^/    /' "$TMP/out.$t"
        fi
    done
done
if [ "$skipped" -gt 0 ]; then
    echo "blackbox: $passed passed, $skipped skipped, $failed failed"
else
    echo "blackbox: $passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
