# The active scenario (seed 004) through the real binary: the household
# pack's facts read from messages, the scenario saved with its turn and
# returned by the conversation, share links and the stream's done event
# (live and replayed from the store after a restart), the client's copy
# on the chat request, PATCH/DELETE of /v1/conversations/{id}/scenario
# with the roles (owner/editor change it, a viewer cannot, another user
# sees 404, a share link is read only), and the model's update_scenario
# calls vetted like any tool call.

SC_NOW=2026-11-24T12:00:00Z

# auth_call METHOD TOKEN PATH [JSON]: any method with a bearer token.
auth_call() {
    RC=0 ERR=
    OUT=$(curl -s -o - -w '\n%{http_code}' -X "$1" -H "Authorization: Bearer $2" -H "$J" \
          "$URL$3" ${4:+-d "$4"})
    CODE=$(printf '%s' "$OUT" | tail -n 1)
    OUT=$(printf '%s' "$OUT" | sed '$d')
}

# done_of FILE: the data line of the done event of an SSE transcript.
done_of() {
    grep -A1 '^event: done$' "$1" | grep '^data: ' | cut -c7-
}

test_scenario_round_trips_over_http_with_roles() {
    db="$TMP/scenario1.db"
    run "$KEEL" keys create --user alice --role owner --db "$db"
    owner=$OUT
    run "$KEEL" keys create --user alice --role editor --db "$db"
    editor=$OUT
    run "$KEEL" keys create --user alice --role viewer --db "$db"
    viewer=$OUT
    run "$KEEL" keys create --user bob --role editor --db "$db"
    other=$OUT
    SERVE_AUTH=keys serve_start "$db" --packs household,scholar

    # Turn 1 states the household; the result carries the scenario.
    auth_post "$editor" '/v1/chat?wait=1' \
        '{"message": "Single earner £45k Scotland — marginal rate at £60k?", "pack": "household"}'
    expect_code 200
    conv=$(printf '%s' "$OUT" | jq -r .conversation_id)
    expect_json '.active_scenario' '{"household":{"country":"scotland","earners":[{"employment_income":45000}]}}'
    expect_json '.scenario_summary' '"Single earner, £45k, Scotland"'
    expect_json '.answer | contains("marginal rate 42% (higher rate)")' 'true'
    expect_json '.scenario_changes' '[{"patch":{"household":{"country":"scotland","earners":[{"employment_income":45000}]}},"source":"message"}]'

    # Turn 2 over a stream: the done event carries the changed scenario.
    auth_post "$editor" /v1/chat "{\"message\": \"What if they were married?\", \"conversation_id\": \"$conv\"}"
    expect_code 202
    cid=$(printf '%s' "$OUT" | jq -r .correlation_id)
    curl -s -N --max-time 20 -H "Authorization: Bearer $editor" "$URL/v1/stream/$cid" > "$TMP/sc.sse"
    OUT=$(done_of "$TMP/sc.sse")
    expect_json '.active_scenario.household.marital_status' '"married"'
    expect_json '.active_scenario.household.earners' '[{"employment_income":45000}]'
    expect_json '.scenario_summary' '"Married, single earner, £45k, Scotland"'
    expect_json '.scenario_changes' '[{"patch":{"household":{"marital_status":"married"}},"source":"message"}]'
    live_done=$OUT

    # Saved with the conversation, the turn's delta on the turn.
    auth_get "$viewer" "/v1/conversations/$conv"
    expect_code 200
    expect_json '.active_scenario.household.marital_status' '"married"'
    expect_json '.scenario_summary' '"Married, single earner, £45k, Scotland"'
    [ "$(sqlite3 "$db" "SELECT scenario_delta FROM turns WHERE conversation_id = '$conv' AND seq = 2")" = \
      '[{"patch":{"household":{"marital_status":"married"}},"source":"message"}]' ] ||
        fail "turn 2's delta: $(sqlite3 "$db" "SELECT scenario_delta FROM turns WHERE seq = 2")"
    [ "$(sqlite3 "$db" "SELECT scenario_version FROM conversations WHERE id = '$conv'")" = 2 ] ||
        fail "the version did not count two changes"

    # PATCH: an editor merges, null clears, a non-object changes nothing.
    auth_call PATCH "$editor" "/v1/conversations/$conv/scenario" '{"reform": {"basic_rate": 21}}'
    expect_code 200
    expect_json '.active_scenario.reform' '{"basic_rate":21}'
    expect_json '.active_scenario.household.marital_status' '"married"'
    auth_call PATCH "$owner" "/v1/conversations/$conv/scenario" '{"reform": null, "household": {"children": 1}}'
    expect_code 200
    expect_json '.active_scenario | has("reform")' 'false'
    expect_json '.scenario_summary' '"Married, single earner, £45k, 1 child, Scotland"'
    before=$(sqlite3 "$db" "SELECT scenario FROM conversations WHERE id = '$conv'")
    auth_call PATCH "$editor" "/v1/conversations/$conv/scenario" '["married"]'
    expect_code 400
    expect_json '.error.field' '"patch"'
    expect_json '.error.message' '"must be a JSON object, not array"'
    for body in '"married"' 42 null; do   # any JSON value parses; the merge refuses it
        auth_call PATCH "$editor" "/v1/conversations/$conv/scenario" "$body"
        expect_code 400
        expect_json '.error.field' '"patch"'
        expect_json '.error.message | startswith("must be a JSON object, not ")' 'true'
    done
    auth_call PATCH "$editor" "/v1/conversations/$conv/scenario" '{"household": "married"}'
    expect_code 400
    expect_json '.error.field' '"patch.household"'
    # the result must hold values a client could send back as its copy
    auth_call PATCH "$editor" "/v1/conversations/$conv/scenario" '{"household": {"country": "mars"}}'
    expect_code 400
    expect_json '.error.field' '"patch.household.country"'
    big=$(head -c 9000 /dev/zero | tr '\0' x)
    auth_call PATCH "$editor" "/v1/conversations/$conv/scenario" "{\"note\": \"$big\"}"
    expect_code 413
    expect_json '.error.field' '"patch"'
    [ "$(sqlite3 "$db" "SELECT scenario FROM conversations WHERE id = '$conv'")" = "$before" ] ||
        fail "a refused patch changed the scenario"

    # Roles: a viewer reads but cannot change; another user sees nothing.
    auth_call GET "$viewer" "/v1/conversations/$conv/scenario"
    expect_code 200
    expect_json '.active_scenario.household.children' '1'
    auth_call PATCH "$viewer" "/v1/conversations/$conv/scenario" '{"reform": {}}'
    expect_code 403
    auth_call DELETE "$viewer" "/v1/conversations/$conv/scenario"
    expect_code 403
    auth_post "$viewer" '/v1/chat?wait=1' \
        "{\"message\": \"hi\", \"conversation_id\": \"$conv\", \"active_scenario\": {\"x\": 1}}"
    expect_code 403
    expect_json '.error.field' '"active_scenario"'
    auth_call GET "$other" "/v1/conversations/$conv/scenario"
    expect_code 404
    auth_call PATCH "$other" "/v1/conversations/$conv/scenario" '{"reform": {}}'
    expect_code 404
    auth_call PUT "$editor" "/v1/conversations/$conv/scenario" '{}'
    expect_code 405
    [ "$(sqlite3 "$db" "SELECT scenario FROM conversations WHERE id = '$conv'")" = "$before" ] ||
        fail "a refused change changed the scenario"

    # A share link shows the scenario and cannot change it.
    auth_post "$owner" "/v1/conversations/$conv/share"
    expect_code 201
    token=$(printf '%s' "$OUT" | jq -r .token)
    get "/v1/shared/$token"
    expect_code 200
    expect_json '.active_scenario.household.children' '1'
    expect_json '.scenario_summary' '"Married, single earner, £45k, 1 child, Scotland"'
    get "/v1/shared/$token/scenario"
    expect_code 200
    expect_json '.active_scenario.household.children' '1'
    expect_json '.scenario_summary' '"Married, single earner, £45k, 1 child, Scotland"'
    expect_json '.conversation_id' "\"$conv\""
    get "/v1/shared/shr_nosuchlink/scenario"
    expect_code 404
    for m in PATCH DELETE POST PUT; do
        body=$(curl -s -X "$m" -H "$J" "$URL/v1/shared/$token/scenario" -d '{"reform": {}}')
        case $body in *"$token"*) fail "$m on a share link's scenario echoed the token: $body" ;; esac
        body=$(curl -s -X "$m" -H "$J" "$URL/v1/shared/$token" -d '{"reform": {}}')
        case $body in *"$token"*) fail "$m on a share link echoed the token: $body" ;; esac
        code=$(curl -s -o /dev/null -w '%{http_code}' -X "$m" -H "$J" "$URL/v1/shared/$token" -d '{"reform": {}}')
        [ "$code" != 200 ] && [ "$code" != 201 ] || fail "$m on a share link answered $code"
        code=$(curl -s -o /dev/null -w '%{http_code}' -X "$m" -H "$J" "$URL/v1/shared/$token/scenario" -d '{"reform": {}}')
        [ "$code" != 200 ] && [ "$code" != 201 ] || fail "$m on a share link's scenario answered $code"
    done
    [ "$(sqlite3 "$db" "SELECT scenario FROM conversations WHERE id = '$conv'")" = "$before" ] ||
        fail "a share link changed the scenario"

    # Client-owns-state: the request's copy wins and is saved.
    auth_post "$editor" '/v1/chat?wait=1' \
        "{\"message\": \"What is the tax?\", \"conversation_id\": \"$conv\", \"active_scenario\": {\"household\": {\"earners\": [{\"employment_income\": 50270}], \"country\": \"rest_of_uk\"}, \"note\": \"client\"}}"
    expect_code 200
    expect_json '.active_scenario' '{"household":{"country":"rest_of_uk","earners":[{"employment_income":50270}]},"note":"client"}'
    expect_json '.answer | contains("income tax £7,540")' 'true'
    auth_post "$editor" '/v1/chat?wait=1' \
        "{\"message\": \"What is the tax?\", \"conversation_id\": \"$conv\", \"active_scenario\": [1]}"
    expect_code 400
    expect_json '.error.field' '"active_scenario"'
    auth_post "$editor" '/v1/chat?wait=1' \
        "{\"message\": \"What is the tax?\", \"conversation_id\": \"$conv\", \"active_scenario\": {\"household\": [1]}}"
    expect_code 400
    expect_json '.error.field' '"active_scenario.household"'
    auth_post "$editor" '/v1/chat?wait=1' \
        "{\"message\": \"What is the tax?\", \"conversation_id\": \"$conv\", \"active_scenario\": {\"household\": {\"earners\": [{\"employment_income\": 1}], \"country\": \"mars\", \"tax_year\": \"1999-00\"}}}"
    expect_code 400
    expect_json '.error.field' '"active_scenario.household.country"'
    auth_post "$editor" '/v1/chat?wait=1' \
        "{\"message\": \"What is the tax?\", \"conversation_id\": \"$conv\", \"active_scenario\": {\"household\": {\"earners\": \"lots\"}}}"
    expect_code 400
    expect_json '.error.field' '"active_scenario.household.earners"'
    auth_get "$editor" "/v1/conversations/$conv"
    expect_json '.active_scenario.note' '"client"'

    # DELETE: no scenario.
    auth_call DELETE "$owner" "/v1/conversations/$conv/scenario"
    expect_code 200
    expect_json '.active_scenario' 'null'
    auth_get "$editor" "/v1/conversations/$conv"
    expect_json '.active_scenario' 'null'
    expect_json '.scenario_summary' 'null'
    serve_stop

    # After a restart the bus has forgotten turn 2: its stream is replayed
    # from the store, the done event with the scenario as it was then.
    SERVE_AUTH=keys serve_start "$db" --packs household,scholar
    curl -s -N --max-time 20 -H "Authorization: Bearer $editor" "$URL/v1/stream/$cid" > "$TMP/sc2.sse"
    [ "$(done_of "$TMP/sc2.sse")" = "$live_done" ] ||
        fail "the replayed done differs: $(done_of "$TMP/sc2.sse") vs $live_done"
    auth_get "$editor" "/v1/responses/$cid"
    expect_json '.result.scenario_summary' '"Married, single earner, £45k, Scotland"'
    expect_json '.result.scenario_changes[0].patch' '{"household":{"marital_status":"married"}}'
    serve_stop
}

test_scenario_a_conversation_without_one_has_null() {
    serve_start "$TMP/scenario2.db"
    post '/v1/chat?wait=1' '{"message": "find papers on sleep"}'
    expect_code 200
    expect_json '.active_scenario' 'null'
    conv=$(printf '%s' "$OUT" | jq -r .conversation_id)
    get "/v1/conversations/$conv/scenario"
    expect_code 200
    expect_json '.active_scenario' 'null'
    # any pack keeps a client's scenario (no household summary there)
    post '/v1/chat?wait=1' "{\"message\": \"find papers on sleep\", \"conversation_id\": \"$conv\", \"active_scenario\": {\"k\": [1, 2]}}"
    expect_code 200
    expect_json '.active_scenario' '{"k":[1,2]}'
    expect_json '.scenario_summary' 'null'
    get "/v1/conversations/no_such/scenario"
    expect_code 404
    serve_stop
}

# ask_household MESSAGE… : turns of keel chat --json on the household pack
# with the scripted model, one per argument; the last turn's JSON in $OUT.
ask_household() {
    : > "$TMP/hh.in"
    for m in "$@"; do printf '%s\n' "$m" >> "$TMP/hh.in"; done
    run "$KEEL" chat --json --pack household --db "$TMP/hh.db" --now "$SC_NOW" --llm-url "$LLM" \
        --llm-model fake-model ${HH_ROLE:+--role "$HH_ROLE"} < "$TMP/hh.in"
    OUT=$(printf '%s\n' "$OUT" | tail -n 1)
}

test_scenario_model_update_scenario_is_vetted_and_the_prompt_carries_the_snapshot() {
    model_start
    rm -f "$TMP/hh.db"
    model_script '[{"tool_calls": [{"name": "update_scenario", "arguments": {"patch": {"reform": {"personal_allowance": 15000}}}},
                                   {"name": "update_scenario", "arguments": {"patch": "married"}},
                                   {"name": "get_scenario", "arguments": {}}]},
                   {"text": "Noted."},
                   {"text": "ok"}, {"text": "Still noted."}]'
    ask_household 'Single earner £45k Scotland' 'How much tax?'
    expect_rc 0
    # turn 1 (the first line of output)
    OUT=$(head -n 1 "$TMP/stdout")
    expect_json '[.model.tool_calls[].verdict]' '["ran","invalid","ran"]'
    expect_json '.model.tool_calls[1].reason' '"args.patch must be a JSON object, not string"'
    expect_json '.active_scenario.reform' '{"personal_allowance":15000}'
    expect_json '.active_scenario.household.country' '"scotland"'
    expect_json '[.tools_called[]] | sort' '["get_scenario","uk_income_tax","update_scenario"]'
    # the offered tools, and turn 2's per-turn block holds the snapshot
    OUT=$(model_requests)
    expect_json '[.[0].tools[].function.name] | sort' '["get_scenario","uk_income_tax","update_scenario"]'
    expect_json '.[0].tools | map(select(.function.name == "update_scenario"))[0].function.parameters.properties.patch.type' '"object"'
    expect_json '.[2].messages[0].content | contains("Active scenario (change it with update_scenario): {\"household\":{\"country\":\"scotland\",\"earners\":[{\"employment_income\":45000}]},\"reform\":{\"personal_allowance\":15000}}")' 'true'
    expect_json '.[2].messages[0].content | contains("In one line: Single earner, £45k, Scotland.")' 'true'
    [ "$(sqlite3 "$TMP/hh.db" "SELECT scenario_delta FROM turns WHERE seq = 1")" = \
      '[{"patch":{"household":{"country":"scotland","earners":[{"employment_income":45000}]}},"source":"message"},{"patch":{"reform":{"personal_allowance":15000}},"source":"tool"}]' ] ||
        fail "turn 1's delta: $(sqlite3 "$TMP/hh.db" "SELECT scenario_delta FROM turns WHERE seq = 1")"
}

test_scenario_a_viewer_is_not_offered_update_scenario_and_its_call_is_refused() {
    model_start
    rm -f "$TMP/hh.db"
    model_script '[{"tool_calls": [{"name": "update_scenario", "arguments": {"patch": {"reform": {}}}}]},
                   {"text": "ok"}]'
    HH_ROLE=viewer ask_household 'Single earner £45k Scotland'
    expect_rc 0
    expect_json '.model.tool_calls[0].verdict' '"refused"'
    expect_json '.active_scenario' 'null'
    OUT=$(model_requests)
    expect_json '[.[0].tools[].function.name] | sort' '["get_scenario","uk_income_tax"]'
}

# kill -9 mid-conversation: every turn changes the scenario; after each
# kill the conversation's scenario is its last stored turn's, its version
# counts the turns that changed it, and every turn the killed process
# printed is stored with the scenario it printed.
test_scenario_kill9_keeps_the_scenario_with_its_turn() {
    if ! command -v sqlite3 > /dev/null 2>&1; then
        echo "skipped: no sqlite3 CLI"
        return 0
    fi
    db="$TMP/sc_crash.db"
    fifo="$TMP/sc_crash.fifo"
    awk 'BEGIN { for (i = 0; i < 300; i++) {
        k = i % 6
        if (k == 0) printf "Single earner \302\243%dk Scotland\n", 20 + i % 70
        else if (k == 1) print "What if they were married?"
        else if (k == 2) printf "%d children\n", i % 4
        else if (k == 3) print "What about in England?"
        else if (k == 4) print "not married, tax year 2025/26"
        else print "Two earners on \302\24330,000 and \302\24312,000" } }' > "$TMP/sc_crash.msgs"
    printf 'Single earner £45k Scotland\n' > "$TMP/sc_crash.first"
    run "$KEEL" chat --pack household --db "$db" --json < "$TMP/sc_crash.first"
    expect_rc 0
    id=$(printf '%s' "$OUT" | jq -r .conversation_id)
    for round in 1 2 3; do
        rm -f "$fifo"
        mkfifo "$fifo"
        "$KEEL" chat --pack household --db "$db" --json --conversation "$id" \
            < "$fifo" > "$TMP/sc_crash.out" 2> /dev/null &
        kpid=$!
        awk '{ print; if (NR % 10 == 0) { fflush(); system("sleep 0.02") } } END { fflush() }' \
            "$TMP/sc_crash.msgs" > "$fifo" &
        gpid=$!
        waited=0
        while [ ! -s "$TMP/sc_crash.out" ] && [ "$waited" -lt 500 ]; do
            sleep 0.01
            waited=$((waited + 1))
        done
        sleep "0.$round"
        kill -9 "$kpid" 2> /dev/null || fail "round $round ended before the kill"
        wait "$kpid" 2> /dev/null || true
        kill "$gpid" 2> /dev/null || true
        wait "$gpid" 2> /dev/null || true
        [ "$(sqlite3 "$db" 'PRAGMA integrity_check')" = ok ] || fail "integrity_check"
        [ "$(sqlite3 "$db" "SELECT count(*) FROM conversations c, turns t
               WHERE c.id = '$id' AND t.conversation_id = c.id AND t.seq = c.turns
                 AND t.scenario_after IS c.scenario")" = 1 ] ||
            fail "round $round: the scenario is not the last turn's"
        [ "$(sqlite3 "$db" "SELECT scenario_version = (SELECT count(*) FROM turns
               WHERE conversation_id = '$id' AND scenario_delta IS NOT NULL)
               FROM conversations WHERE id = '$id'")" = 1 ] ||
            fail "round $round: the version does not count the changing turns"
        while IFS= read -r l; do printf '%s\n' "$l"; done < "$TMP/sc_crash.out" |
            jq -c '[.turn, (.active_scenario | tojson)]' > "$TMP/sc_crash.acked"
        [ -s "$TMP/sc_crash.acked" ] || fail "round $round printed no complete turn"
        while IFS= read -r pair; do
            turn=$(printf '%s' "$pair" | jq -r '.[0]')
            printed=$(printf '%s' "$pair" | jq -r '.[1]')
            stored=$(sqlite3 "$db" "SELECT scenario_after FROM turns
                                    WHERE conversation_id = '$id' AND seq = $turn")
            [ "$stored" = "$printed" ] ||
                fail "round $round turn $turn: stored $stored, printed $printed"
        done < "$TMP/sc_crash.acked"
        echo "round $round: $(wc -l < "$TMP/sc_crash.acked") turns acknowledged, $(sqlite3 "$db" "SELECT turns FROM conversations WHERE id = '$id'") stored"
    done
    rm -f "$fifo"
}
