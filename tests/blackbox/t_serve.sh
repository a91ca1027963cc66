# keel serve over HTTP with curl: health, models, a turn queued then
# streamed (SSE) and polled, ?wait=1, a second message to a conversation
# whose first turn is still queued, conversation and decision reads, the
# error statuses, a stream replayed from the store after a restart with
# Last-Event-ID, a graceful stop that finishes accepted turns, and the
# options keel refuses.

test_serve_turn_streamed_and_polled() {
    serve_start "$TMP/serve1.db"
    get /healthz
    expect_code 200
    expect_json '.status' '"ok"'
    expect_json '.workers' '2'
    get /v1/models
    expect_json '[.data[].id]' '["scholar","payer","household","assistant"]'
    get /
    expect_code 200
    printf '%s' "$OUT" | grep -q 'EventSource' || fail "the page has no stream client"

    post /v1/chat '{"message": "find recent papers on sleep and memory"}'
    expect_code 202
    expect_json '.status' '"queued"'
    cid=$(printf '%s' "$OUT" | jq -r .correlation_id)
    conv=$(printf '%s' "$OUT" | jq -r .conversation_id)
    case "$cid" in turn_*) ;; *) fail "correlation id: $cid" ;; esac
    expect_json '.links.stream' "\"/v1/stream/$cid\""

    curl -s -N --max-time 20 "$URL/v1/stream/$cid" > "$TMP/sse.txt"
    grep -q '^event: stage$' "$TMP/sse.txt" || fail "no stage events: $(head -c 400 "$TMP/sse.txt")"
    grep -q '^data: {"kind":"info","message":"Searching for papers…","stage":"resolve"}$' "$TMP/sse.txt" ||
        fail "no user-level search line"
    grep -q '^event: token$' "$TMP/sse.txt" || fail "no answer tokens"
    [ "$(grep -c '^event: done$' "$TMP/sse.txt")" = 1 ] || fail "not one done event"
    [ "$(tail -n 3 "$TMP/sse.txt" | head -n 1 | cut -c1-11)" = "event: done" ] ||
        fail "done is not last: $(tail -n 4 "$TMP/sse.txt")"
    # the ids count up from 1 without gaps
    ids=$(grep '^id: ' "$TMP/sse.txt" | cut -c5- | tr '\n' ' ')
    n=$(grep -c '^id: ' "$TMP/sse.txt")
    [ "$ids" = "$(seq 1 "$n" | tr '\n' ' ')" ] || fail "ids: $ids"
    # the tokens put together are the answer of done and of the poll
    tokens=$(grep -A1 '^event: token$' "$TMP/sse.txt" | grep '^data: ' | cut -c7- | jq -j .text)
    done_answer=$(grep -A1 '^event: done$' "$TMP/sse.txt" | grep '^data: ' | cut -c7- | jq -j .answer)
    [ "$tokens" = "$done_answer" ] || fail "tokens differ from the answer"
    get "/v1/responses/$cid"
    expect_code 200
    expect_json '.status' '"done"'
    expect_json '.conversation_id' "\"$conv\""
    [ "$(printf '%s' "$OUT" | jq -j .result.answer)" = "$done_answer" ] || fail "poll answer differs"
    expect_json '.result.decision.intent' '"direct_search"'
    expect_json '.result.tools_called' '["search_papers"]'
    expect_json '.result.stage' '"finding_papers"'
    serve_stop
}

test_serve_wait_and_queued_conversation() {
    serve_start "$TMP/serve2.db"
    post /v1/chat '{"message": "how do I file an appeal", "pack": "payer"}'
    expect_code 202
    conv=$(printf '%s' "$OUT" | jq -r .conversation_id)
    first=$(printf '%s' "$OUT" | jq -r .correlation_id)
    # sent at once, before the first turn may have ended
    post '/v1/chat?wait=1' "{\"message\": \"Sunshine\", \"conversation_id\": \"$conv\"}"
    expect_code 200
    expect_json '.turn' '2'
    expect_json '.clarification' 'null'
    expect_json '.answer | contains("Sunshine Health")' 'true'
    get "/v1/conversations/$conv"
    expect_code 200
    expect_json '[.pack, .turns, (.messages | length)]' '["payer",2,2]'
    expect_json '.messages[0].user' '"how do I file an appeal"'
    expect_json '.state.jurisdiction.payer' '"Sunshine Health"'
    get "/v1/turns/$first/decision"
    expect_code 200
    expect_json '.turn' '1'
    expect_json '.decision | has("intent")' 'true'
    # a conversation of another pack cannot be continued under this one
    post /v1/chat "{\"message\": \"x\", \"conversation_id\": \"$conv\", \"pack\": \"scholar\"}"
    expect_code 400
    expect_json '.error.field' '"pack"'
    serve_stop
}

test_serve_errors() {
    serve_start "$TMP/serve3.db"
    post /v1/chat '{}'
    expect_code 400
    expect_json '.error' '{"code":"bad_request","message":"is required","field":"message"}'
    post /v1/chat '{"message": "   "}'
    expect_code 400
    expect_json '.error.message' '"must not be blank"'
    post /v1/chat '{"message": "x", "colour": "red"}'
    expect_code 400
    expect_json '.error.field' '"colour"'
    post /v1/chat '{"message": "x", "pack": "nope"}'
    expect_code 400
    post /v1/chat '{"message": "x", "conversation_id": "conv_nope"}'
    expect_code 404
    post /v1/chat 'not json'
    expect_code 400
    expect_json '.error.code' '"bad_json"'
    post /v1/chat '[1, 2]'
    expect_code 400
    long=$(head -c 9000 /dev/zero | tr '\0' 'a')
    post /v1/chat "{\"message\": \"$long\"}"
    expect_code 413
    expect_json '.error.field' '"message"'
    big=$(head -c 70000 /dev/zero | tr '\0' 'a')
    printf '{"message": "%s"}' "$big" > "$TMP/big.json"
    OUT=$(curl -s -H "$J" -w '\n%{http_code}' -X POST "$URL/v1/chat" --data-binary "@$TMP/big.json")
    CODE=$(printf '%s' "$OUT" | tail -n 1)
    expect_code 413
    OUT=$(curl -s -w '\n%{http_code}' -X POST "$URL/v1/chat" -H 'Content-Type: text/plain' -d 'hi')
    CODE=$(printf '%s' "$OUT" | tail -n 1)
    expect_code 415
    get /v1/chat
    expect_code 405
    for m in PUT OPTIONS DELETE; do
        OUT=$(curl -s -X "$m" -w '\n%{http_code}' "$URL/v1/chat")
        CODE=$(printf '%s' "$OUT" | tail -n 1)
        OUT=$(printf '%s' "$OUT" | sed '$d')
        expect_code 405
        expect_json '.error.code' '"method_not_allowed"'
    done
    post /v1/models '{}'
    expect_code 405
    post /healthz '{}'
    expect_code 405
    post /v1/chat/completions '{"model": "nope", "messages": [{"role": "user", "content": "hi"}]}'
    expect_code 400
    expect_json '.error.field' '"model"'
    long=$(head -c 9000 /dev/zero | tr '\0' 'a')
    post /v1/chat/completions "{\"model\": \"scholar\", \"messages\": [{\"role\": \"user\", \"content\": \"$long\"}]}"
    expect_code 413
    expect_json '.error.code' '"too_large"' 
    get /v1/responses/turn_01AAAAAAAAAAAAAAAAAAAAAAAA
    expect_code 404
    expect_json '.error.field' '"correlation_id"'
    get /v1/stream/turn_01AAAAAAAAAAAAAAAAAAAAAAAA
    expect_code 404
    get /v1/conversations/conv_nope
    expect_code 404
    get /v1/nowhere
    expect_code 404
    serve_stop
}

# A message of a role keel does not take is a 400 naming the message
# (messages[i].role) and the roles it takes, never "holds no user message"
# or a turn run on an earlier message.
test_serve_completions_name_a_bad_role() {
    serve_start "$TMP/serve_roles.db"
    post /v1/chat/completions '{"model": "scholar", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}, {"role": "robot", "content": "beep"}]}'
    expect_code 400
    expect_json '.error.code' '"bad_request"'
    expect_json '.error.field' '"messages[2].role"'
    expect_json '.error.message | test("robot")' 'true'
    for role in system developer user assistant; do
        expect_json ".error.message | test(\"$role\")" 'true'
    done
    post /v1/chat/completions '{"model": "scholar", "messages": [{"role": "tool", "content": "{}", "tool_call_id": "x"}, {"role": "user", "content": "hi"}]}'
    expect_code 400
    expect_json '.error.field' '"messages[0].role"'
    post /v1/chat/completions '{"model": "scholar", "messages": [{"content": "hi"}]}'
    expect_code 400
    expect_json '.error.field' '"messages[0].role"'
    post /v1/chat/completions '{"model": "scholar", "messages": [{"role": "user", "content": "hi"}, 7]}'
    expect_code 400
    expect_json '.error.field' '"messages[1]"'
    post /v1/chat/completions '{"model": "scholar", "messages": [{"role": "developer", "content": "be brief"}, {"role": "user", "content": "find papers on sleep and memory"}, {"role": "assistant", "content": "…"}]}'
    expect_code 200
    expect_json '.choices[0].message.role' '"assistant"'
    serve_stop
}

# A document's source is its path below the ingested folder: the
# server's directories show neither in a turn's sources nor through a
# share link, the conversation or its doc extract (the payer pack's sample
# corpus is ingested on first run).
test_serve_sources_show_no_server_path() {
    real=$(cd "$root" && pwd -P)
    serve_start "$TMP/serve_paths.db"
    post '/v1/chat?wait=1' '{"message": "what are the deadlines for a Sunshine Health appeal according to the handbook", "pack": "payer"}'
    expect_code 200
    expect_json '.artifact.type' '"doc_extract"'
    expect_json '(.sources | length) > 0' 'true'
    expect_json '[.sources[] | .source | type == "string" and (startswith("/") | not)] | all' 'true'
    expect_json '[.sources[] | .source == (.document_id | ltrimstr("corpus/"))] | all' 'true'
    conv=$(printf '%s' "$OUT" | jq -r .conversation_id)
    cid=$(printf '%s' "$OUT" | jq -r .correlation_id)
    art=$(printf '%s' "$OUT" | jq -r .artifact.id)
    post "/v1/conversations/$conv/share" '{}'
    expect_code 201
    link=$(printf '%s' "$OUT" | jq -r .url)
    for p in "/v1/responses/$cid" "/v1/conversations/$conv" "$link" "$link/artifacts/$art" \
             /v1/facts; do
        get "$p"
        expect_code 200
        case "$OUT" in *"$real/"* | *"$root/"*) fail "$p shows a server path" ;; esac
    done
    get "$link/artifacts/$art"
    expect_json '[.. | objects | .source? | strings] | length > 0' 'true'
    serve_stop
}

# refused STATUS CODE FIELD CURL-ARGS…: curl's request gets keel's JSON
# error with that status, code and field, and the connection is closed.
refused() {
    status=$1 code=$2 field=$3
    shift 3
    got=$(curl -s -D "$TMP/refused.h" -o "$TMP/refused.b" -w '%{http_code}' "$@") || true
    [ "$got" = "$status" ] || fail "expected HTTP $status, got $got: $(head -c 300 "$TMP/refused.b")"
    grep -qi '^Content-Type: application/json' "$TMP/refused.h" ||
        fail "HTTP $status is not JSON: $(cat "$TMP/refused.h") $(head -c 200 "$TMP/refused.b")"
    grep -qi '^Connection: close' "$TMP/refused.h" || fail "HTTP $status keeps the connection"
    jq -e --arg c "$code" --arg f "$field" '.error.code == $c and .error.field == $f and
        (.error.message | length > 0)' "$TMP/refused.b" > /dev/null ||
        fail "HTTP $status: $(cat "$TMP/refused.b")"
}

# What evhttp refuses itself (a body over 1 MiB, a request line and
# headers over 16 KiB, a malformed header) is keel's JSON error, not
# evhttp's HTML page, and the server goes on serving.
test_serve_evhttp_caps_answer_json() {
    serve_start "$TMP/caps.db"
    head -c 1100000 /dev/zero | tr '\0' 'a' > "$TMP/big.body"
    refused 413 too_large body -X POST -H "$J" --data-binary "@$TMP/big.body" "$URL/v1/chat"
    # chunked, sent as it is read: the body grows past the cap chunk by chunk
    head -c 1300000 /dev/zero | tr '\0' 'a' |
        refused 413 too_large body -X POST -H "$J" -H 'Transfer-Encoding: chunked' \
            --data-binary @- "$URL/v1/chat"
    line=$(head -c 60 /dev/zero | tr '\0' 'h')
    set --
    i=0
    while [ "$i" -lt 300 ]; do
        set -- "$@" -H "X-Header-$i: $line"
        i=$((i + 1))
    done
    refused 431 too_large headers "$@" "$URL/healthz"
    big=$(head -c 20000 /dev/zero | tr '\0' 'h')
    refused 431 too_large headers -H "X-Big: $big" "$URL/healthz"
    refused 431 too_large headers "$URL/healthz?x=$big"
    refused 400 bad_request headers -X POST -H 'Content-Length: many' "$URL/v1/chat"
    # keel's own cap still answers below evhttp's, on a connection kept open
    head -c 70000 /dev/zero | tr '\0' 'a' > "$TMP/mid.body"
    got=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "$J" --data-binary "@$TMP/mid.body" \
        "$URL/v1/chat" -: -o "$TMP/after.json" -w '%{http_code}' "$URL/healthz")
    [ "$got" = "413200" ] || fail "keel's cap, then /healthz on the same connection: $got"
    get /healthz
    expect_code 200
    expect_json '.status' '"ok"'
    serve_stop
}

# A stream of a finished turn is the same whether the bus still holds its
# events or the store replays them (after a restart). A ?wait=1 turn is
# quiet (nobody can follow it while it runs, so its stage lines and
# answer pieces are not kept on the bus): its stream comes from the store
# at once and still has every event.
test_serve_replays_a_stream_after_restart() {
    serve_start "$TMP/serve4.db"
    post '/v1/chat' '{"message": "find papers on graph neural networks"}'
    expect_code 202
    queued=$(printf '%s' "$OUT" | jq -r .correlation_id)
    curl -s -N --max-time 20 "$URL/v1/stream/$queued" > "$TMP/live_queued.txt"
    post '/v1/chat?wait=1' '{"message": "find papers on graph neural networks"}'
    expect_code 200
    cid=$(printf '%s' "$OUT" | jq -r .correlation_id)
    curl -s -N --max-time 20 "$URL/v1/stream/$cid" > "$TMP/live.txt"
    serve_stop
    serve_start "$TMP/serve4.db"
    curl -s -N --max-time 20 "$URL/v1/stream/$queued" > "$TMP/replay_queued.txt"
    cmp -s "$TMP/live_queued.txt" "$TMP/replay_queued.txt" ||
        fail "replay differs: $(diff "$TMP/live_queued.txt" "$TMP/replay_queued.txt" | head -n 10)"
    curl -s -N --max-time 20 "$URL/v1/stream/$cid" > "$TMP/replay.txt"
    cmp -s "$TMP/live.txt" "$TMP/replay.txt" ||
        fail "replay differs: $(diff "$TMP/live.txt" "$TMP/replay.txt" | head -n 10)"
    # the two turns said the same, numbered the same
    [ "$(grep -v '^data: ' "$TMP/live.txt")" = "$(grep -v '^data: ' "$TMP/live_queued.txt")" ] ||
        fail "the waited turn's stream differs: $(grep -c '^id: ' "$TMP/live.txt") events"
    grep -q '^event: stage$' "$TMP/live.txt" || fail "the waited turn's stream has no stage line"
    grep -q '^event: token$' "$TMP/live.txt" || fail "the waited turn's stream has no answer piece"
    n=$(grep -c '^id: ' "$TMP/replay.txt")
    curl -s -N --max-time 20 -H "Last-Event-ID: $((n - 2))" "$URL/v1/stream/$cid" > "$TMP/resumed.txt"
    [ "$(grep '^id: ' "$TMP/resumed.txt" | cut -c5- | tr '\n' ' ')" = "$((n - 1)) $n " ] ||
        fail "resumed: $(grep '^id: ' "$TMP/resumed.txt" | tr '\n' ' ')"
    serve_stop
}

# Last-Event-ID is one of the stream's own `id:` numbers: anything else
# (keel never sent it) is a 400 naming the header, not a silent replay of
# the whole stream; an empty value is no id at all, as in EventSource.
test_serve_refuses_a_bad_last_event_id() {
    serve_start "$TMP/serve_leid.db"
    post '/v1/chat?wait=1' '{"message": "find papers on graph neural networks"}'
    expect_code 200
    cid=$(printf '%s' "$OUT" | jq -r .correlation_id)
    for bad in abc -1 12x +3 ' 4 5' 1.5 99999999999999999999 2147483648; do
        OUT=$(curl -s --max-time 20 -w '\n%{http_code}' -H "Last-Event-ID: $bad" "$URL/v1/stream/$cid")
        CODE=$(printf '%s' "$OUT" | tail -n 1)
        OUT=$(printf '%s' "$OUT" | sed '$d')
        expect_code 400
        expect_json '.error.code' '"bad_request"'
        expect_json '.error.field' '"Last-Event-ID"'
    done
    curl -s -N --max-time 20 "$URL/v1/stream/$cid" > "$TMP/all.txt"
    n=$(grep -c '^id: ' "$TMP/all.txt")
    for header in 'Last-Event-ID: 0' 'Last-Event-ID;'; do   # "X;" is curl's empty header
        curl -s -N --max-time 20 -H "$header" "$URL/v1/stream/$cid" > "$TMP/again.txt"
        cmp -s "$TMP/all.txt" "$TMP/again.txt" || fail "$header is not the whole stream"
    done
    curl -s -N --max-time 20 -H "Last-Event-ID: $n" "$URL/v1/stream/$cid" > "$TMP/none.txt"
    [ ! -s "$TMP/none.txt" ] || fail "after the last event: $(head -c 200 "$TMP/none.txt")"
    serve_stop
}

test_serve_stops_after_accepted_turns() {
    db="$TMP/serve5.db"
    serve_start "$db" --workers 1
    for i in 1 2 3 4 5 6 7 8; do
        post /v1/chat '{"message": "find papers on protein folding"}'
        expect_code 202
    done
    kill -TERM "$SERVE_PID"
    wait "$SERVE_PID"
    status=$?
    [ "$status" = 0 ] || fail "exit status $status: $(cat "$TMP/serve.err")"
    [ "$(sqlite3 "$db" 'SELECT count(*) FROM turns')" = 8 ] ||
        fail "turns stored: $(sqlite3 "$db" 'SELECT count(*) FROM turns')"
    grep -q '"server.stopped"' "$TMP/serve.err" || fail "no stop line"
}

test_serve_refuses_bad_options() {
    run "$KEEL" serve --auth none --listen 0.0.0.0:0 --db "$TMP/serve6.db"
    expect_rc 2
    expect_err "--auth none is refused on 0.0.0.0"
    run "$KEEL" serve --auth none --db mem:
    expect_rc 2
    expect_err "keel serve needs a SQLite file"
    run "$KEEL" serve --auth maybe --db "$TMP/serve6.db"
    expect_rc 2
    expect_err "keys or none"
    run "$KEEL" serve --auth none --listen nowhere --db "$TMP/serve6.db"
    expect_rc 2
    expect_err "must be HOST:PORT"
    run "$KEEL" serve --auth none --workers 0 --db "$TMP/serve6.db"
    expect_rc 2
    run "$KEEL" serve --auth none --packs scholar,nope --listen 127.0.0.1:0 --db "$TMP/serve6.db"
    expect_rc 1
    expect_err "nope"
}

test_serve_keys_and_the_authorisation_matrix() {
    db="$TMP/serve7.db"
    run "$KEEL" keys create --user alice --role owner --db "$db"
    expect_rc 0
    expect_err "the token is shown only now"
    owner=$OUT
    case "$owner" in keel_*) ;; *) fail "token: $owner" ;; esac
    # only the hash is stored
    [ "$(sqlite3 "$db" "SELECT count(*) FROM api_keys WHERE hash = '$owner'")" = 0 ] ||
        fail "the token itself is stored"
    run "$KEEL" keys create --user alice --role editor --db "$db"
    editor=$OUT
    run "$KEEL" keys create --user alice --role viewer --db "$db"
    viewer=$OUT
    run "$KEEL" keys create --user bob --role editor --db "$db"
    other=$OUT
    run "$KEEL" keys create --user bob --role admin --db "$db"
    expect_rc 2
    expect_err "must be owner, editor or viewer"
    run "$KEEL" keys list --db "$db" --json
    expect_json 'length' '4'
    expect_json '[.[] | has("hash")] | any' 'false'

    SERVE_AUTH=keys serve_start "$db"

    # no token, a wrong one: 401 on every /v1 route; the page and health stay open
    get /v1/models
    expect_code 401
    expect_json '.error.code' '"unauthorized"'
    auth_get keel_wrong /v1/models
    expect_code 401
    get /healthz
    expect_code 200

    auth_post "$editor" '/v1/chat?wait=1' '{"message": "find papers on sleep and memory"}'
    expect_code 200
    conv=$(printf '%s' "$OUT" | jq -r .conversation_id)
    cid=$(printf '%s' "$OUT" | jq -r .correlation_id)
    [ "$(sqlite3 "$db" "SELECT owner FROM conversations WHERE id = '$conv'")" = alice ] ||
        fail "owner not stored"
    # the same user, any role, reads it; another user sees nothing
    for t in "$owner" "$editor" "$viewer"; do
        auth_get "$t" "/v1/conversations/$conv"
        expect_code 200
        auth_get "$t" "/v1/responses/$cid"
        expect_code 200
        auth_get "$t" "/v1/turns/$cid/decision"
        expect_code 200
    done
    for p in "/v1/conversations/$conv" "/v1/responses/$cid" "/v1/turns/$cid/decision" \
             "/v1/stream/$cid"; do
        auth_get "$other" "$p"
        expect_code 404
    done
    auth_post "$other" /v1/chat "{\"message\": \"hello\", \"conversation_id\": \"$conv\"}"
    expect_code 404
    # a viewer may chat; streams take the token as a query parameter too
    auth_post "$viewer" '/v1/chat?wait=1' "{\"message\": \"and since 2024?\", \"conversation_id\": \"$conv\"}"
    expect_code 200
    expect_json '.turn' '2'
    [ "$(curl -s "$URL/v1/stream/$cid?access_token=$editor" | grep -c '^event: done$')" = 1 ] ||
        fail "no stream with access_token"
    # share: not for viewers; the link reads without a key and only reads
    auth_post "$viewer" "/v1/conversations/$conv/share"
    expect_code 403
    auth_post "$editor" "/v1/conversations/$conv/share"
    expect_code 201
    link=$(printf '%s' "$OUT" | jq -r .url)
    token=$(printf '%s' "$OUT" | jq -r .token)
    get "$link"
    expect_code 200
    expect_json '[.id, .turns]' "[\"$conv\",2]"
    # the answer's [1] … come with their sources
    expect_json '[.messages[] | .sources | type] | unique' '["array"]'
    expect_json '(.messages[0].sources | length) > 0' 'true'
    expect_json '.messages[0].sources[0].n' '1'
    get /v1/shared/shr_nothing
    expect_code 404
    auth_post "$token" /v1/chat '{"message": "hi"}'
    expect_code 401
    # a revoked key stops at once
    id=$("$KEEL" keys list --db "$db" --json | jq -r '.[] | select(.user == "bob") | .id')
    run "$KEEL" keys revoke "$id" --db "$db"
    expect_rc 0
    auth_get "$other" /v1/models
    expect_code 401
    expect_json '.error.message' '"the API key was revoked"'
    serve_stop
}

test_serve_conversations_and_metrics() {
    serve_start "$TMP/serve8.db"
    post /v1/conversations '{"pack": "payer"}'
    expect_code 201
    expect_json '[.pack, .turns]' '["payer",0]'
    named=$(printf '%s' "$OUT" | jq -r .id)
    # the named conversation is stored with its first turn
    post '/v1/chat?wait=1' "{\"message\": \"how do I file an appeal\", \"conversation_id\": \"$named\"}"
    expect_code 200
    expect_json '.conversation_id' "\"$named\""
    named_turn=$(printf '%s' "$OUT" | jq -r .correlation_id)
    post '/v1/chat?wait=1' '{"message": "find recent papers on sleep and memory"}'
    expect_code 200
    other=$(printf '%s' "$OUT" | jq -r .conversation_id)
    get '/v1/conversations?limit=10'
    expect_code 200
    expect_json '[.data[].id] | sort' "$(printf '["%s","%s"]' "$named" "$other" | jq -c sort)"
    get '/v1/conversations?limit=1&offset=1'
    expect_json '.data | length' '1'
    get '/v1/conversations?limit=0'
    expect_code 400
    expect_json '.error.field' '"limit"'
    # delete: gone with its turns; again 404
    OUT=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$URL/v1/conversations/$named")
    [ "$OUT" = 204 ] || fail "delete: $OUT"
    get "/v1/conversations/$named"
    expect_code 404
    OUT=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$URL/v1/conversations/$named")
    [ "$OUT" = 404 ] || fail "second delete: $OUT"
    # nothing of it is served any more, and its id is not a conversation
    get "/v1/responses/$named_turn"
    expect_code 404
    get "/v1/stream/$named_turn"
    expect_code 404
    post /v1/chat "{\"message\": \"hi\", \"conversation_id\": \"$named\"}"
    expect_code 404
    # quality metrics: one direct search, its tool called, its years kept
    get /v1/metrics/quality
    expect_code 200
    expect_json '.counters.direct_search_turns' '1'
    expect_json '.rates.direct_search_tool_call_rate' '1'
    expect_json '.rates.recency_filter_compliance' '1'
    get /metrics
    expect_code 200
    printf '%s\n' "$OUT" | grep -qx 'keel_turns_total 2' || fail "no turn count: $OUT"
    printf '%s\n' "$OUT" | grep -q '^keel_stage_seconds_count{stage="load"} 2$' ||
        fail "no stage histogram"
    printf '%s\n' "$OUT" | grep -q '^keel_quality_direct_search_tool_call_rate 1.000000$' ||
        fail "no quality rate"
    printf '%s\n' "$OUT" | grep -q '{}' && fail "empty label braces in /metrics"
    post /v1/metrics/quality/reset ''
    expect_code 200
    expect_json '.counters.direct_search_turns' '0'
    serve_stop
}

test_serve_rate_limit_per_key() {
    db="$TMP/serve9.db"
    run "$KEEL" keys create --user rate --role editor --db "$db"
    token=$OUT
    SERVE_AUTH=keys serve_start "$db" --rate 2
    # 100 requests on one connection: the burst (4) passes, then 429s
    urls=$(for i in $(seq 100); do printf '%s/v1/models ' "$URL"; done)
    # shellcheck disable=SC2086
    codes=$(curl -s -D "$TMP/h.txt" -H "Authorization: Bearer $token" -o /dev/null \
            -w '%{http_code}\n' $urls | sort | uniq -c | tr -s ' ' | tr '\n' ';')
    case "$codes" in *" 200;"*" 429;"*) ;; *) fail "codes: $codes" ;; esac
    grep -qi '^Retry-After: [0-9]' "$TMP/h.txt" || fail "no Retry-After on a 429"
    # other routes without a key are not counted against it
    get /healthz
    expect_code 200
    serve_stop
}

test_serve_keeps_the_traceparent() {
    RC=0 ERR=
    serve_start "$TMP/serve10.db"
    tp='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    OUT=$(curl -s -H "$J" -H "traceparent: $tp" "$URL/v1/chat?wait=1" -d '{"message": "hello"}')
    cid=$(printf '%s' "$OUT" | jq -r .correlation_id)
    serve_stop
    got=$(sqlite3 "$TMP/serve10.db" "SELECT json_extract(e.value, '\$.extra.traceparent') FROM turns, json_each(turns.events) AS e WHERE turns.correlation_id = '$cid' AND json_extract(e.value, '\$.extra.traceparent') IS NOT NULL")
    [ "$got" = "$tp" ] || fail "traceparent stored: '$got'"
}

test_serve_quality_history() {
    RC=0 ERR=
    serve_start "$TMP/serve11.db"
    post '/v1/chat?wait=1' '{"message": "find recent papers on sleep and memory"}'
    expect_code 200
    get '/v1/metrics/quality/history?aggregate_minutes=15'
    expect_code 200
    expect_json '.aggregate_minutes' '15'
    expect_json '.periods | length' '1'
    expect_json '.periods[0].counters.direct_search_turns' '1'
    expect_json '.periods[0].rates.direct_search_tool_call_rate' '1'
    expect_json '.periods[0].start_ms % 900000' '0'
    get '/v1/metrics/quality/history?aggregate_minutes=0'
    expect_code 400
    expect_json '.error.field' '"aggregate_minutes"'
    serve_stop
}

# slow_openalex MS: a fake OpenAlex that answers every search after MS
# milliseconds (its pid in $slow, killed when the test file ends), and
# KEEL_OPENALEX_URL pointing at it.
slow_openalex() {
    FAKE_HTTP=${FAKE_HTTP:-$(dirname "$KEEL")/keel-fake-http}
    rm -f "$TMP/slow.port"
    "$FAKE_HTTP" --port-file "$TMP/slow.port" --route /works \
        --reply "200 delay=$1 text={\"results\": []}" > /dev/null 2>&1 &
    slow=$!
    bg_track "$slow"
    i=0
    while [ ! -s "$TMP/slow.port" ] && [ "$i" -lt 200 ]; do i=$((i + 1)); sleep 0.05; done
    export KEEL_OPENALEX_URL="http://127.0.0.1:$(cat "$TMP/slow.port")"
}

# A turn waiting on the network (a paper provider that answers after 3 s)
# holds up no other: with two workers, a greeting in another conversation
# is answered at once (the waiting worker let the store go), and the
# search ends afterwards.
test_serve_a_turn_waiting_on_the_network_holds_up_no_other() {
    RC=0 ERR=
    slow_openalex 3000
    serve_start "$TMP/serve_wait.db" --providers openalex --workers 3
    post /v1/chat '{"message": "find recent papers on sleep and memory"}'
    expect_code 202
    cid=$(printf '%s' "$OUT" | jq -r .correlation_id)
    sleep 0.3   # the search is waiting on the provider
    took=$(curl -s -o "$TMP/hello.json" -w '%{time_total}' -H 'Content-Type: application/json'                -d '{"message": "hello"}' "$URL/v1/chat?wait=1")
    OUT=$(cat "$TMP/hello.json")
    expect_json '.turn' '1'
    awk -v t="$took" 'BEGIN { exit !(t < 1.5) }' ||
        fail "the greeting took ${took}s behind the waiting search"
    get "/v1/responses/$cid"
    expect_json '.status' '"running"'
    curl -s -N --max-time 20 "$URL/v1/stream/$cid" > "$TMP/waited.txt"
    grep -q '^event: done$' "$TMP/waited.txt" || fail "the search did not end"
    serve_stop
    kill "$slow" 2>/dev/null || true
    wait "$slow" 2>/dev/null || true
}

# A worker commits the turns it runs back to back together; a turn is
# answered only once it is stored: each conversation, read from the loop
# thread's own connection right after its answer, holds its turn.
test_serve_answered_turns_are_stored() {
    RC=0 ERR= OUT=
    serve_start "$TMP/serve_batch.db"
    pids=""
    for n in $(seq 24); do
        (
            curl -s -H "$J" -d '{"message": "find recent papers on sleep and memory"}' \
                "$URL/v1/chat?wait=1" > "$TMP/batch$n.json" &&
                conv=$(jq -r .conversation_id "$TMP/batch$n.json") &&
                curl -s "$URL/v1/conversations/$conv" > "$TMP/batchc$n.json"
        ) &
        pids="$pids $!"
    done
    for p in $pids; do
        wait "$p" || fail "request $p failed"
    done
    for n in $(seq 24); do
        [ "$(jq -r .turn "$TMP/batch$n.json")" = 1 ] ||
            fail "answer $n: $(head -c 300 "$TMP/batch$n.json")"
        [ "$(jq -c '[.turns, (.messages | length)]' "$TMP/batchc$n.json")" = "[1,1]" ] ||
            fail "conversation $n read after its answer: $(head -c 300 "$TMP/batchc$n.json")"
    done
    serve_stop
}

test_serve_open_streams_per_key() {
    RC=0 ERR=
    # A paper provider that answers after 4 s keeps the turn, and so its
    # streams, open.
    slow_openalex 4000
    db="$TMP/serve12.db"
    run "$KEEL" keys create --user many --role editor --db "$db"
    token=$OUT
    SERVE_AUTH=keys serve_start "$db" --providers openalex --rate 1000
    auth_post "$token" /v1/chat '{"message": "find recent papers on sleep and memory"}'
    expect_code 202
    cid=$(printf '%s' "$OUT" | jq -r .correlation_id)
    pids=""
    for n in $(seq 64); do
        curl -s -N --max-time 30 -o /dev/null -H "Authorization: Bearer $token" \
            "$URL/v1/stream/$cid" &
        pids="$pids $!"
    done
    sleep 1
    CODE=$(curl -s -o "$TMP/s65.json" -w '%{http_code}' -H "Authorization: Bearer $token" \
           "$URL/v1/stream/$cid")
    OUT=$(cat "$TMP/s65.json")
    expect_code 429
    expect_json '.error.code' '"too_many_streams"'
    for p in $pids; do   # the 64 streams end with the turn
        wait "$p" || true
    done
    serve_stop
    kill "$slow" 2>/dev/null || true
    wait "$slow" 2>/dev/null || true
}

test_serve_many_streams_get_every_event() {
    RC=0 ERR=
    # 300 streams of one turn, more than the server sends to in one loop
    # pass (128): each gets every event, the same bytes, and its end.
    slow_openalex 3000
    serve_start "$TMP/serve13.db" --providers openalex
    post /v1/chat '{"message": "find recent papers on sleep and memory"}'
    expect_code 202
    cid=$(printf '%s' "$OUT" | jq -r .correlation_id)
    set --
    for n in $(seq 300); do
        set -- "$@" -o "$TMP/many$n.txt" "$URL/v1/stream/$cid"
    done
    curl -s -N --max-time 10 --parallel --parallel-immediate --parallel-max 300 "$@" 2> /dev/null ||
        fail "the streams did not end"
    get /healthz
    expect_json '.open_streams' '0'
    [ "$(grep -c '^event: done$' "$TMP/many1.txt")" = 1 ] || fail "stream 1 has no done event"
    [ "$(grep -c '^id: ' "$TMP/many1.txt")" -gt 5 ] || fail "stream 1 has too few events"
    for n in $(seq 2 300); do
        cmp -s "$TMP/many1.txt" "$TMP/many$n.txt" || fail "stream $n differs from stream 1"
    done
    serve_stop
    kill "$slow" 2>/dev/null || true
    wait "$slow" 2>/dev/null || true
}
