# keel replay: pass, fail, fixture errors, file shapes, exit codes.

case_json() {
    # case_json NAME USER EXPECT
    printf '{"name": "%s", "pack": "scholar", "now": "2026-02-07T12:00:00Z", "turns": [{"user": "%s", "expect": %s}]}\n' "$1" "$2" "$3"
}

test_passing_case() {
    case_json ok "find recent papers on sleep" '{"intent": "direct_search", "search": {"year_from": 2022}}' > "$TMP/ok.json"
    run "$KEEL" replay "$TMP/ok.json"
    expect_rc 0
    expect_out "1 passed, 0 failed"
}

test_failing_case_reports_field() {
    case_json wrong "find recent papers on sleep" '{"search": {"year_from": 2021}}' > "$TMP/bad.json"
    run "$KEEL" replay "$TMP/bad.json"
    expect_rc 1
    expect_out 'case "wrong" turn 1: search.year_from: expected 2021, actual 2022'
    expect_out "0 passed, 1 failed"
}

test_unknown_key_is_an_error() {
    case_json typo "hi" '{"intnet": "general"}' > "$TMP/typo.json"
    run "$KEEL" replay "$TMP/typo.json"
    expect_rc 1
    expect_out 'unknown key "intnet"'
}

test_json_lines_and_arrays_in_a_folder() {
    mkdir -p "$TMP/fx"
    { case_json a "hi" '{"intent": "general"}'; case_json b "stop" '{"route": "command"}'; } > "$TMP/fx/one.jsonl"
    printf '[%s,%s]\n' "$(case_json c "hello" '{"reason": "smalltalk"}')" \
        "$(case_json d "summarize these papers" '{"intent": "analysis"}')" > "$TMP/fx/two.json"
    run "$KEEL" replay "$TMP/fx"
    expect_rc 0
    expect_out "4 passed, 0 failed"
}

test_invalid_json_fails() {
    printf '{"name": "x", ' > "$TMP/broken.json"
    run "$KEEL" replay "$TMP/broken.json"
    expect_rc 1
    expect_out "invalid JSON"
}

test_missing_path_fails() {
    run "$KEEL" replay "$TMP/nope.json"
    expect_rc 1
    expect_out "0 passed, 1 failed"
}

test_project_fixtures_pass() {
    run "$KEEL" replay "$root/tests/replay"
    expect_rc 0
    expect_out " passed, 0 failed"
}

test_wrong_type_in_expect_is_an_error() {
    case_json typed "hi" '{"tool_veto": "no"}' > "$TMP/typed.json"
    run "$KEEL" replay "$TMP/typed.json"
    expect_rc 1
    expect_out "tool_veto: must be true or false, not string"
}

test_bad_json_line_names_its_line() {
    { case_json a "hi" '{"intent": "general"}'; case_json b "hi" '{"intent": "general"}'; printf '{"name": oops}\n'; } > "$TMP/lines.jsonl"
    run "$KEEL" replay "$TMP/lines.jsonl"
    expect_rc 1
    expect_out "near line 3"
    expect_out "2 passed, 1 failed"
}

test_broken_pack_reported_once() {
    mkdir -p "$TMP/bp/scholar"
    echo 'name: [' > "$TMP/bp/scholar/pack.yaml"
    { case_json a "hi" '{"intent": "general"}'; case_json b "hi" '{"intent": "general"}'; } > "$TMP/two.jsonl"
    run "$KEEL" replay --packs "$TMP/bp" "$TMP/two.jsonl"
    expect_rc 1
    expect_out "could not be loaded (reported above)"
    [ "$(printf '%s\n' "$OUT" | grep -c 'pack.yaml:')" -eq 1 ] || fail "pack error not reported exactly once"
}
