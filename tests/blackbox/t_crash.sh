# kill -9 in the middle of a conversation: `keel chat --json` reads many
# messages from a FIFO fed in bursts and is killed with SIGKILL after it
# has answered some, at a seeded pseudo-random moment, five times, each
# round resuming the same conversation. After every round the SQLite file
# must be consistent (checked with the sqlite3 CLI) and every turn the
# killed process printed (acknowledged) must be stored, with the user
# message that was sent and the answer that was printed.
#
# KEEL_CRASH_SEED picks the kill moments (default 42); KEEL_CRASH_ROUNDS
# the number of rounds (default 5).

crash_messages() {
    awk 'BEGIN {
        n = split("how do I file an appeal|Sunshine|what is the deadline to file a grievance?|" \
                  "what about UHC?|what is the status of my claim?|" \
                  "my member id is AB123456, how do I check eligibility?|Aetna|" \
                  "can I get prior authorization for an MRI with Molina in Florida?|" \
                  "thanks|yes|how do I file an appeal and what is the deadline?|Medicaid", m, "|")
        for (i = 0; i < 300; i++) print m[i % n + 1]
    }'
}

# crash_feed FILE: writes FILE's lines in bursts of 10, 20 ms apart, so
# keel is busy most of the time yet 300 lines take over half a second.
crash_feed() {
    awk '{ print; if (NR % 10 == 0) { fflush(); system("sleep 0.02") } } END { fflush() }' "$1"
}

# The delay before the kill of round $1, from 0.05 to 0.35 s.
crash_delay() {
    awk -v seed="${KEEL_CRASH_SEED:-42}" -v round="$1" \
        'BEGIN { srand(seed * 100 + round); printf "%.3f", 0.05 + rand() * 0.30 }'
}

# q SQL: the first column of the first row of SQL on $db.
q() {
    sqlite3 -batch "$db" "$1"
}

# expect_zero WHAT SQL: SQL (a count) must be 0.
expect_zero() {
    got=$(q "$2") || fail "sqlite3 failed on: $2"
    [ "$got" = 0 ] || fail "$1: $got (query: $2)"
}

crash_check_store() {
    [ "$(q 'PRAGMA integrity_check')" = ok ] || fail "integrity_check: $(q 'PRAGMA integrity_check')"
    expect_zero "turns without exactly a user and an assistant message" "
        SELECT count(*) FROM turns t WHERE
          (SELECT count(*) FROM messages m
            WHERE m.conversation_id = t.conversation_id AND m.turn_seq = t.seq) != 2
          OR NOT EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = t.conversation_id
                          AND m.turn_seq = t.seq AND m.role = 'user')
          OR NOT EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = t.conversation_id
                          AND m.turn_seq = t.seq AND m.role = 'assistant')"
    expect_zero "turns without exactly one decision" "
        SELECT count(*) FROM turns t WHERE (SELECT count(*) FROM decisions d
          WHERE d.conversation_id = t.conversation_id AND d.turn_seq = t.seq) != 1"
    expect_zero "messages without their turn" "
        SELECT count(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM turns t
          WHERE t.conversation_id = m.conversation_id AND t.seq = m.turn_seq)"
    expect_zero "decisions without their turn" "
        SELECT count(*) FROM decisions d WHERE NOT EXISTS (SELECT 1 FROM turns t
          WHERE t.conversation_id = d.conversation_id AND t.seq = d.turn_seq)"
    expect_zero "turns without their conversation" "
        SELECT count(*) FROM turns t WHERE NOT EXISTS (SELECT 1 FROM conversations c
          WHERE c.id = t.conversation_id)"
    # turns = count = max(seq) and min(seq) = 1, with (conversation, seq)
    # unique: the seqs are exactly 1..N.
    expect_zero "conversations whose turn count or seqs are off" "
        SELECT count(*) FROM conversations c WHERE
          c.turns != (SELECT count(*) FROM turns t WHERE t.conversation_id = c.id)
          OR c.turns != (SELECT coalesce(max(seq), 0) FROM turns t WHERE t.conversation_id = c.id)
          OR (SELECT min(seq) FROM turns t WHERE t.conversation_id = c.id) != 1"
    expect_zero "conversations whose state is not their last turn's" "
        SELECT count(*) FROM conversations c WHERE NOT EXISTS (SELECT 1 FROM turns t
          WHERE t.conversation_id = c.id AND t.seq = c.turns AND t.state_after = c.state)"
    expect_zero "states that are not JSON objects" "
        SELECT (SELECT count(*) FROM turns WHERE NOT json_valid(state_after)
                  OR json_type(state_after) != 'object')
             + (SELECT count(*) FROM conversations WHERE NOT json_valid(state)
                  OR json_extract(state, '\$.turns') != turns)"
    expect_zero "turns whose state does not count them" "
        SELECT count(*) FROM turns WHERE json_extract(state_after, '\$.turns') != seq"
    expect_zero "turns without start and end events of load and publish" "
        SELECT count(*) FROM turns t WHERE NOT json_valid(t.events) OR (
          SELECT count(DISTINCT json_extract(e.value, '\$.stage') || ':' ||
                                json_extract(e.value, '\$.kind'))
            FROM json_each(t.events) e
           WHERE json_extract(e.value, '\$.stage') IN ('load', 'publish')
             AND json_extract(e.value, '\$.kind') IN ('start', 'end')) != 4"
    expect_zero "turns whose last event is not publish's end" "
        SELECT count(*) FROM turns t WHERE
          json_extract(t.events, '\$[#-1].stage') != 'publish'
          OR json_extract(t.events, '\$[#-1].kind') != 'end'"
    # The turns counter moved with the turns, in the same transactions.
    [ "$(q "SELECT coalesce((SELECT value FROM metrics WHERE name = 'turns'), 0)")" = \
      "$(q 'SELECT count(*) FROM turns')" ] ||
        fail "metrics.turns $(q "SELECT value FROM metrics WHERE name = 'turns'") != $(q 'SELECT count(*) FROM turns') turns"
}

# crash_check_acked OUT SENT FIRST: every complete JSON line of OUT is a
# stored turn whose user message is the matching line of SENT (turn
# FIRST+k answered line k) and whose assistant message is the printed
# answer. A last line cut by the kill has no newline and is left out.
crash_check_acked() {
    while IFS= read -r l; do printf '%s\n' "$l"; done < "$1" > "$TMP/crash.complete"
    [ -s "$TMP/crash.complete" ] || fail "the killed process printed no complete line"
    if jq -e 'select(has("error"))' "$TMP/crash.complete" > /dev/null; then
        fail "error lines: $(jq -c 'select(has("error"))' "$TMP/crash.complete" | head -n 3)"
    fi
    {
        echo "CREATE TEMP TABLE sent (k INTEGER PRIMARY KEY, text TEXT);"
        echo "CREATE TEMP TABLE acked (line TEXT);"
        awk -v q="'" '{ gsub(q, q q); print "INSERT INTO sent VALUES (" NR ", " q $0 q ");" }' "$2"
        awk -v q="'" '{ gsub(q, q q); print "INSERT INTO acked VALUES (" q $0 q ");" }' \
            "$TMP/crash.complete"
        echo "SELECT count(*) FROM acked a WHERE
                json_extract(a.line, '\$.conversation_id') != '$id'
                OR NOT EXISTS (SELECT 1 FROM messages m, sent s
                     WHERE m.conversation_id = '$id'
                       AND m.turn_seq = json_extract(a.line, '\$.turn')
                       AND m.role = 'user' AND s.k = m.turn_seq - $3 AND m.text = s.text)
                OR NOT EXISTS (SELECT 1 FROM messages m
                     WHERE m.conversation_id = '$id'
                       AND m.turn_seq = json_extract(a.line, '\$.turn')
                       AND m.role = 'assistant' AND m.text = json_extract(a.line, '\$.answer'));"
        echo "SELECT count(*) FROM acked;"
        echo "SELECT min(json_extract(line, '\$.turn')) || ' ' || max(json_extract(line, '\$.turn'))
                FROM acked;"
    } > "$TMP/crash.sql"
    sqlite3 -batch "$db" < "$TMP/crash.sql" > "$TMP/crash.result" || fail "sqlite3 on the acked turns"
    missing=$(sed -n 1p "$TMP/crash.result")
    acked=$(sed -n 2p "$TMP/crash.result")
    range=$(sed -n 3p "$TMP/crash.result")
    [ "$missing" = 0 ] || fail "$missing of $acked acknowledged turns are not stored as printed"
    # The printed turns are consecutive from the first one after FIRST.
    [ "$range" = "$(($3 + 1)) $(($3 + acked))" ] ||
        fail "acknowledged turns $range, expected $(($3 + 1)) to $(($3 + acked))"
}

test_crash_kill9_keeps_store_consistent() {
    if ! command -v sqlite3 > /dev/null 2>&1; then
        echo "skipped: no sqlite3 CLI"
        return 0
    fi
    db="$TMP/crash.db"
    fifo="$TMP/crash.fifo"
    crash_messages > "$TMP/crash.msgs"

    # The conversation to resume; the sample corpus is ingested here.
    printf 'how do I file an appeal\n' > "$TMP/crash.first"
    run "$KEEL" chat --pack payer --db "$db" --json < "$TMP/crash.first"
    expect_rc 0
    id=$(printf '%s' "$OUT" | jq -r .conversation_id)
    case "$id" in conv_*) ;; *) fail "no conversation id: $OUT" ;; esac

    killed=0
    round=1
    while [ "$round" -le "${KEEL_CRASH_ROUNDS:-5}" ]; do
        before=$(q "SELECT turns FROM conversations WHERE id = '$id'")
        rm -f "$fifo"
        mkfifo "$fifo"
        "$KEEL" chat --pack payer --db "$db" --json --conversation "$id" \
            < "$fifo" > "$TMP/crash.out" 2> "$TMP/crash.err" &
        kpid=$!
        crash_feed "$TMP/crash.msgs" > "$fifo" &
        gpid=$!
        # Some answers first, then the seeded delay, then SIGKILL.
        waited=0
        while [ ! -s "$TMP/crash.out" ] && [ "$waited" -lt 500 ]; do
            sleep 0.01
            waited=$((waited + 1))
        done
        sleep "$(crash_delay "$round")"
        if kill -9 "$kpid" 2> /dev/null; then
            killed=$((killed + 1))
        fi
        wait "$kpid" 2> /dev/null || true
        kill "$gpid" 2> /dev/null || true
        wait "$gpid" 2> /dev/null || true
        after=$(q "SELECT turns FROM conversations WHERE id = '$id'")
        echo "round $round: turns $before -> $after, $(grep -c . "$TMP/crash.out") lines printed"
        [ "$after" -gt "$before" ] || fail "round $round stored no turn"
        [ "$after" -lt "$((before + 300))" ] || fail "round $round was not killed mid-way"
        crash_check_store
        crash_check_acked "$TMP/crash.out" "$TMP/crash.msgs" "$before"
        round=$((round + 1))
    done
    [ "$killed" -eq "${KEEL_CRASH_ROUNDS:-5}" ] || fail "only $killed rounds were killed"

    # The conversation goes on after the last kill.
    run "$KEEL" chat --pack payer --db "$db" --json --conversation "$id" < "$TMP/crash.first"
    expect_rc 0
    expect_json '.turn' "$(($(q "SELECT turns FROM conversations WHERE id = '$id'")))"
    expect_json '.conversation_id' "\"$id\""
    crash_check_store
    rm -f "$fifo" "$db" "$db-wal" "$db-shm"
}
