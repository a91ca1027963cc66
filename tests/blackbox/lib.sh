# Helpers for black-box tests. `run CMD…` captures stdout, stderr and the
# exit code into $OUT, $ERR and $RC; the expect_* helpers fail the test
# (return non-zero, which `set -e` turns into a failure) with a message.

run() {
    set +e
    "$@" > "$TMP/stdout" 2> "$TMP/stderr"
    RC=$?
    set -e
    OUT=$(cat "$TMP/stdout")
    ERR=$(cat "$TMP/stderr")
}

fail() {
    echo "  $*"
    echo "  exit code: $RC"
    echo "  stdout: $OUT" | head -n 20
    echo "  stderr: $ERR" | head -n 20
    return 1
}

expect_rc() {
    [ "$RC" -eq "$1" ] || fail "expected exit code $1"
}

expect_out() {
    printf '%s' "$OUT" | grep -qF -- "$1" || fail "stdout lacks: $1"
}

expect_err() {
    printf '%s' "$ERR" | grep -qF -- "$1" || fail "stderr lacks: $1"
}

# expect_json FILTER VALUE: jq FILTER over stdout must print VALUE (compact).
expect_json() {
    got=$(printf '%s' "$OUT" | jq -c "$1") || fail "stdout is not JSON"
    [ "$got" = "$2" ] || fail "jq '$1' gave $got, expected $2"
}

# bg_track PID: a process the test started. A test that fails before
# stopping it must not leave it running: each test runs in a subshell,
# whose EXIT trap stops every tracked process.
bg_track() {
    BG_PIDS="${BG_PIDS:-} $1"
    trap 'kill -TERM $BG_PIDS 2>/dev/null || true' EXIT
}

# ---- keel serve (t_serve.sh, t_openai.sh) ----

J='Content-Type: application/json'

# serve_start DB [ARGS…]: starts keel serve on a free loopback port
# (--auth $SERVE_AUTH, default none); sets $URL and $SERVE_PID.
serve_start() {
    db=$1
    shift
    rm -f "$TMP/serve.port"
    "$KEEL" serve --auth "${SERVE_AUTH:-none}" --listen 127.0.0.1:0 --db "$db" \
        --port-file "$TMP/serve.port" "$@" > "$TMP/serve.out" 2> "$TMP/serve.err" &
    SERVE_PID=$!
    bg_track "$SERVE_PID"
    i=0
    while [ ! -s "$TMP/serve.port" ]; do
        i=$((i + 1))
        if [ "$i" -gt 600 ] || ! kill -0 "$SERVE_PID" 2>/dev/null; then
            echo "keel serve did not start: $(cat "$TMP/serve.err")"
            return 1
        fi
        sleep 0.05
    done
    URL="http://127.0.0.1:$(cat "$TMP/serve.port")"
}

serve_stop() {
    kill -TERM "$SERVE_PID" 2>/dev/null || true
    wait "$SERVE_PID" 2>/dev/null
}

# post PATH JSON: POST with a JSON body; the body in $OUT, status in $CODE.
post() {
    RC=0 ERR=
    OUT=$(curl -s -H "$J" -o - -w '\n%{http_code}' -X POST "$URL$1" -d "$2")
    CODE=$(printf '%s' "$OUT" | tail -n 1)
    OUT=$(printf '%s' "$OUT" | sed '$d')
}

get() {
    RC=0 ERR=
    OUT=$(curl -s -o - -w '\n%{http_code}' "$URL$1")
    CODE=$(printf '%s' "$OUT" | tail -n 1)
    OUT=$(printf '%s' "$OUT" | sed '$d')
}

expect_code() {
    [ "$CODE" = "$1" ] || fail "expected HTTP $1, got $CODE: $OUT"
}

# auth_get/auth_post TOKEN PATH [JSON]: like get/post with a bearer token.
auth_get() {
    RC=0 ERR=
    OUT=$(curl -s -o - -w '\n%{http_code}' -H "Authorization: Bearer $1" "$URL$2")
    CODE=$(printf '%s' "$OUT" | tail -n 1)
    OUT=$(printf '%s' "$OUT" | sed '$d')
}

auth_post() {
    RC=0 ERR=
    OUT=$(curl -s -o - -w '\n%{http_code}' -H "Authorization: Bearer $1" -H "$J" -X POST "$URL$2" \
          -d "${3:-}")
    CODE=$(printf '%s' "$OUT" | tail -n 1)
    OUT=$(printf '%s' "$OUT" | sed '$d')
}


# npm_package DIR NAME: installs tests/DIR's pinned packages once (npm ci)
# into a cache beside the keel binary; prints the cache folder.
npm_package() {
    cache="$(cd "$(dirname "$KEEL")" && pwd)/npm-$1"
    if [ ! -f "$cache/node_modules/$2/package.json" ]; then
        mkdir -p "$cache"
        cp "$root/tests/$1/package.json" "$root/tests/$1/package-lock.json" "$cache/"
        (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error) > "$TMP/npm.log" 2>&1 || {
            echo "npm ci of $2 failed: $(tail -n 5 "$TMP/npm.log")" >&2
            return 1
        }
    fi
    cp "$root/tests/$1"/*.mjs "$cache/"
    printf '%s' "$cache"
}

# ---- the scripted model server (t_llm.sh, t_memory.sh) ----

FAKE_OPENAI=${FAKE_OPENAI:-$(dirname "$KEEL")/keel-fake-openai}

# model_start: starts the fake model server; sets $CTL (its control URL)
# and $LLM (its /v1).
model_start() {
    rm -f "$TMP/model.port"
    "$FAKE_OPENAI" --port-file "$TMP/model.port" > "$TMP/model.log" 2>&1 &
    MODEL_PID=$!
    bg_track "$MODEL_PID"
    i=0
    while [ ! -s "$TMP/model.port" ]; do
        i=$((i + 1))
        [ "$i" -lt 200 ] || { echo "keel-fake-openai did not start"; return 1; }
        sleep 0.05
    done
    CTL="http://127.0.0.1:$(cat "$TMP/model.port")"
    LLM="$CTL/v1"
    unset KEEL_LLM_URL KEEL_LLM_MODEL KEEL_LLM_KEY_ENV
}

# model_script JSON: the fake's replies, in order (the last repeats).
model_script() {
    curl -sf -X POST "$CTL/_script" -H "$J" -d "$1" > /dev/null || {
        RC=1 OUT= ERR=
        fail "the fake model refused the script"
    }
}

# model_requests: the chat request bodies the fake received, as JSON.
model_requests() {
    curl -sf "$CTL/_requests"
}

