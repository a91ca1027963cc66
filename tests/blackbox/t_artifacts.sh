# Artifacts and facts (seed 001) through the real binary: keel chat --json
# shows the artifact and the gate's decision and appends the JSONL export
# beside the store (or where --artifacts-dir says, or nowhere); keel serve
# lists and fetches artifacts and facts over HTTP with keys (another
# user's are absent, viewers read, share links read only), deletes them
# with their conversation, keeps hostile conversation ids inside the
# export directory, replays a turn's artifact from the store after a
# restart (the same done event), and a kill -9 leaves no artifact without
# its turn.

BRIEF='find recent papers on sleep and memory and summarize the evidence with citations'

test_artifacts_chat_json_and_export() {
    cd "$TMP" && mkdir -p chat1 && cd chat1
    run sh -c "printf '%s\nthanks\n' '$BRIEF' | '$KEEL' chat --pack scholar --db k.db --json"
    expect_rc 0
    first=$(printf '%s' "$OUT" | head -n 1)
    [ "$(printf '%s' "$first" | jq -r .artifact.type)" = research_brief ] || fail "no brief: $first"
    [ "$(printf '%s' "$first" | jq -r .artifact.exported)" = true ] || fail "not exported"
    [ "$(printf '%s' "$first" | jq -r .artifact_gate.reason)" = selected ] || fail "gate: $first"
    facts=$(printf '%s' "$first" | jq -r .artifact.facts)
    [ "$facts" -ge 2 ] || fail "facts: $facts"
    second=$(printf '%s' "$OUT" | sed -n 2p)
    [ "$(printf '%s' "$second" | jq -c .artifact)" = null ] || fail "thanks got an artifact"
    [ "$(printf '%s' "$second" | jq -r .artifact_gate.reason)" = too_short ] || fail "$second"
    conv=$(printf '%s' "$first" | jq -r .conversation_id)
    id=$(printf '%s' "$first" | jq -r .artifact.id)
    # the export beside the store: one line, the stored artifact
    [ -f "k.artifacts/$conv.jsonl" ] || fail "no export: $(ls -R)"
    [ "$(wc -l < "k.artifacts/$conv.jsonl")" -eq 1 ] || fail "export lines"
    [ "$(jq -r .id "k.artifacts/$conv.jsonl")" = "$id" ] || fail "export id"
    [ "$(sqlite3 k.db "SELECT body FROM artifacts WHERE id = '$id'" | jq -S -c .)" = \
      "$(jq -S -c . "k.artifacts/$conv.jsonl")" ] || fail "the export differs from the store"
    [ "$(sqlite3 k.db "SELECT count(*) FROM facts WHERE artifact_id = '$id' AND store = 'researched'")" = "$facts" ] ||
        fail "facts in the store"
    # the gate's decision is in the stored decision log
    [ "$(sqlite3 k.db "SELECT json_extract(decision, '\$.artifact.outcome') FROM decisions WHERE turn_seq = 1")" = built ] ||
        fail "decision log"
    # --artifacts-dir none: stored, not exported; a directory of one's own
    run sh -c "printf '%s\n' '$BRIEF' | '$KEEL' chat --pack scholar --db k2.db --json --artifacts-dir none"
    [ "$(printf '%s' "$OUT" | jq -r .artifact.exported)" = false ] || fail "exported with none"
    [ ! -e k2.artifacts ] || fail "none made a directory"
    run sh -c "printf '%s\n' '$BRIEF' | '$KEEL' chat --pack scholar --db k2.db --json --artifacts-dir out/arts"
    [ "$(ls out/arts | wc -l)" -eq 1 ] || fail "no export in out/arts"
    # the text output names it
    run sh -c "printf '%s\n' '$BRIEF' | '$KEEL' chat --pack scholar --db mem:"
    expect_out 'Artifact: research_brief'
    expect_out 'fact(s))'
}

test_artifacts_fail_closed_and_plans() {
    cd "$TMP" && mkdir -p chat2 && cd chat2
    run sh -c "printf 'find papers on sparse autoencoders and summarize with citations\n' | '$KEEL' chat --pack scholar --db k.db --json"
    expect_rc 0
    expect_json '.artifact' 'null'
    expect_json '.artifact_gate.reason' '"too_few_sources"'
    expect_json '.artifact_gate.outcome' '"failed"'
    expect_out 'I found 1 paper on'
    expect_err '"event":"artifact.failed"'
    [ "$(sqlite3 k.db 'SELECT count(*) FROM artifacts')" = 0 ] || fail "a failed brief was stored"
    [ ! -e k.artifacts ] || fail "a failed brief was exported"
    run sh -c "printf 'what steps should I take to file an appeal with Sunshine Health, give me a plan\n' | '$KEEL' chat --pack payer --db p.db --json"
    expect_json '.artifact.type' '"plan"'
    expect_json '.artifact.facts' '0'
    [ "$(sqlite3 p.db 'SELECT count(*) FROM facts')" = 0 ] || fail "a plan wrote facts"
}

test_artifacts_over_http() {
    db="$TMP/http.db"
    run "$KEEL" keys create --user alice --role editor --db "$db"
    alice=$OUT
    run "$KEEL" keys create --user alice --role viewer --db "$db"
    viewer=$OUT
    run "$KEEL" keys create --user bob --role editor --db "$db"
    bob=$OUT
    SERVE_AUTH=keys serve_start "$db"
    auth_post "$alice" '/v1/chat?wait=1' "{\"message\": \"$BRIEF\"}"
    expect_code 200
    expect_json '.artifact.type' '"research_brief"'
    conv=$(printf '%s' "$OUT" | jq -r .conversation_id)
    cid=$(printf '%s' "$OUT" | jq -r .correlation_id)
    id=$(printf '%s' "$OUT" | jq -r .artifact.id)
    n=$(printf '%s' "$OUT" | jq -r .artifact.facts)
    auth_post "$alice" '/v1/chat?wait=1' "{\"message\": \"help me plan my steps for a literature review on sleep\", \"conversation_id\": \"$conv\"}"
    expect_code 200
    plan=$(printf '%s' "$OUT" | jq -r '.artifact.id // empty')

    auth_get "$alice" "/v1/conversations/$conv/artifacts"
    expect_code 200
    expect_json '.data[0].id' "\"$id\""
    expect_json '.data[0].artifact.content.claims | length > 0' 'true'
    auth_get "$alice" "/v1/conversations/$conv/artifacts?type=research_brief&last=1"
    expect_json '[.data[].type]' '["research_brief"]'
    auth_get "$alice" "/v1/conversations/$conv/artifacts?type=doc_extract"
    expect_json '.data' '[]'
    auth_get "$alice" "/v1/conversations/$conv/artifacts?type=memo"
    expect_code 400
    expect_json '.error.field' '"type"'
    auth_get "$alice" "/v1/conversations/$conv/artifacts?last=0"
    expect_code 400
    expect_json '.error.field' '"last"'
    auth_get "$alice" "/v1/artifacts/$id"
    expect_code 200
    expect_json '.conversation_id' "\"$conv\""
    expect_json '.facts | length' "$n"
    printf '%s' "$OUT" | jq -r .markdown | grep -q '^# Research brief: ' || fail "markdown: $OUT"
    printf '%s' "$OUT" | jq -r .markdown | grep -q '^## Sources' || fail "no sources section"
    auth_get "$alice" /v1/artifacts/art_nothing
    expect_code 404
    expect_json '.error.field' '"artifact_id"'
    auth_get "$alice" '/v1/facts?store=researched'
    expect_code 200
    expect_json '.data | length' "$n"
    expect_json '[.data[].artifact_id] | unique' "[\"$id\"]"
    expect_json '.data[0] | keys' '["artifact_id","confidence","conversation_id","created_ms","domain","evidence_snippet","fact","id","source","store","tags","topic"]'
    expect_json '.data[0].domain' '"science"'
    auth_get "$alice" '/v1/facts?store=verified'
    expect_json '.data' '[]'
    auth_get "$alice" '/v1/facts?limit=1&offset=1'
    expect_json '.data | length' '1'
    auth_get "$alice" '/v1/facts?store=rumours'
    expect_code 400
    expect_json '.error.field' '"store"'
    auth_get "$alice" '/v1/facts?limit=999'
    expect_code 400
    expect_json '.error.field' '"limit"'
    auth_post "$alice" /v1/facts '{}'
    expect_code 405
    auth_post "$alice" "/v1/artifacts/$id" '{}'
    expect_code 405
    # the decision log carries the gate's decision
    auth_get "$alice" "/v1/turns/$cid/decision"
    expect_json '.decision.artifact.reason' '"selected"'
    expect_json '.decision.artifact.intent' '"research_brief"'

    # a viewer of the same user reads; another user sees nothing
    auth_get "$viewer" "/v1/artifacts/$id"
    expect_code 200
    auth_get "$bob" "/v1/conversations/$conv/artifacts"
    expect_code 404
    auth_get "$bob" "/v1/artifacts/$id"
    expect_code 404
    expect_json '.error.field' '"artifact_id"'
    auth_get "$bob" /v1/facts
    expect_json '.data' '[]'
    get "/v1/facts"
    expect_code 401

    # a share link reads its conversation's artifacts, and only those
    auth_post "$alice" "/v1/conversations/$conv/share"
    token=$(printf '%s' "$OUT" | jq -r .token)
    get "/v1/shared/$token/artifacts"
    expect_code 200
    expect_json '.data[0].id' "\"$id\""
    get "/v1/shared/$token/artifacts/$id"
    expect_code 200
    expect_json '.markdown | startswith("# Research brief")' 'true'
    auth_post "$bob" '/v1/chat?wait=1' "{\"message\": \"$BRIEF\"}"
    other=$(printf '%s' "$OUT" | jq -r .artifact.id)
    get "/v1/shared/$token/artifacts/$other"
    expect_code 404
    get "/v1/shared/shr_nothing/artifacts"
    expect_code 404
    curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/v1/shared/$token/artifacts" > "$TMP/code"
    [ "$(cat "$TMP/code")" = 405 ] || fail "POST on a share link: $(cat "$TMP/code")"

    # deleting the conversation deletes its artifacts, facts and export
    [ -f "$TMP/http.artifacts/$conv.jsonl" ] || fail "no export for $conv"
    curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Authorization: Bearer $alice" \
        "$URL/v1/conversations/$conv" > "$TMP/code"
    [ "$(cat "$TMP/code")" = 204 ] || fail "delete: $(cat "$TMP/code")"
    auth_get "$alice" "/v1/artifacts/$id"
    expect_code 404
    auth_get "$alice" /v1/facts
    expect_json '.data' '[]'
    [ ! -e "$TMP/http.artifacts/$conv.jsonl" ] || fail "the export stayed"
    [ -n "$plan" ] || true
    serve_stop
}

test_artifacts_hostile_conversation_ids() {
    mkdir -p "$TMP/hostile/inside"
    serve_start "$TMP/hostile/inside/h.db" --artifacts-dir "$TMP/hostile/inside/exports"
    for name in '..' '..:..' '.hidden' 'a..b' '...'; do
        body=$(jq -n --arg u "$name" --arg m "$BRIEF" \
               '{model: "scholar", user: $u, messages: [{role: "user", content: $m}]}')
        post /v1/chat/completions "$body"
        expect_code 200
        OUT=$(curl -s --path-as-is "$URL/v1/conversations/$name/artifacts")
        expect_json '.data | length' '1'
    done
    # every file is inside the export directory, none starts with a dot
    [ "$(ls -A "$TMP/hostile/inside/exports" | wc -l)" = 5 ] ||
        fail "exports: $(ls -A "$TMP/hostile/inside/exports")"
    ls -A "$TMP/hostile/inside/exports" | grep -q '^\.' && fail "a dot file: $(ls -A "$TMP/hostile/inside/exports")"
    [ -z "$(find "$TMP/hostile" -name '*.jsonl' ! -path "$TMP/hostile/inside/exports/*")" ] ||
        fail "a file outside: $(find "$TMP/hostile" -name '*.jsonl')"
    # the names are the sanitised ids with a hash
    ls "$TMP/hostile/inside/exports" | grep -q '^__-[0-9a-f]\{16\}\.jsonl$' || fail "$(ls "$TMP/hostile/inside/exports")"
    serve_stop
}

test_artifacts_survive_kill_9() {
    cd "$TMP" && mkdir -p crash && cd crash
    i=0
    : > msgs
    while [ "$i" -lt 200 ]; do
        printf '%s\nfind papers on graph neural networks and give an overview with citations\n' "$BRIEF" >> msgs
        i=$((i + 1))
    done
    : > out.jsonl
    "$KEEL" chat --pack scholar --db c.db --json < msgs > out.jsonl 2> err.txt &
    pid=$!
    bg_track "$pid"
    j=0
    while [ "$(wc -l < out.jsonl)" -lt 5 ] && [ "$j" -lt 400 ]; do sleep 0.05; j=$((j + 1)); done
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    turns=$(sqlite3 c.db 'SELECT count(*) FROM turns')
    [ "$turns" -ge 5 ] || fail "only $turns turns before the kill"
    # every stored turn that built an artifact has it, every artifact its turn
    [ "$(sqlite3 c.db "SELECT count(*) FROM decisions WHERE json_extract(decision, '\$.artifact.outcome') = 'built'")" = \
      "$(sqlite3 c.db 'SELECT count(*) FROM artifacts')" ] || fail "artifacts and decisions differ"
    [ "$(sqlite3 c.db 'SELECT count(*) FROM artifacts a LEFT JOIN turns t ON t.conversation_id = a.conversation_id AND t.seq = a.turn_seq WHERE t.seq IS NULL')" = 0 ] ||
        fail "an artifact without its turn"
    [ "$(sqlite3 c.db 'SELECT count(*) FROM facts f LEFT JOIN artifacts a ON a.id = f.artifact_id WHERE a.id IS NULL')" = 0 ] ||
        fail "a fact without its artifact"
    # the export may lack the last line (appended after the commit), never more
    lines=$(cat c.artifacts/*.jsonl | wc -l)
    arts=$(sqlite3 c.db 'SELECT count(*) FROM artifacts')
    [ "$lines" -le "$arts" ] && [ "$lines" -ge $((arts - 1)) ] || fail "export $lines, store $arts"
}

test_artifacts_replayed_from_the_store() {
    serve_start "$TMP/replay.db"
    post '/v1/chat?wait=1' "{\"message\": \"$BRIEF\"}"
    expect_code 200
    expect_json '.artifact | keys' '["facts","id","title","type"]'
    cid=$(printf '%s' "$OUT" | jq -r .correlation_id)
    live=$(printf '%s' "$OUT" | jq -c .artifact)
    curl -s -N --max-time 20 "$URL/v1/stream/$cid" > "$TMP/live.txt"
    serve_stop
    # after a restart the turn comes from the store: the same artifact, the same bytes
    serve_start "$TMP/replay.db"
    get "/v1/responses/$cid"
    expect_json '.result.artifact' "$live"
    curl -s -N --max-time 20 "$URL/v1/stream/$cid" > "$TMP/replay.txt"
    cmp -s "$TMP/live.txt" "$TMP/replay.txt" ||
        fail "replay differs: $(diff "$TMP/live.txt" "$TMP/replay.txt" | head -n 10)"
    grep -A1 '^event: done$' "$TMP/replay.txt" | grep -q '"artifact":{[^}]*"id":"art_' ||
        fail "no artifact in the replayed done event"
    serve_stop
}
