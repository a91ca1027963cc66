# keel policy explain / shell, as a user runs them.

test_seed_example_json() {
    run "$KEEL" policy explain "Can you find me some recent papers on this topic?" \
        --pack scholar --topic "social media and academic performance" \
        --tools search_papers --role editor --now 2026-02-07T12:00:00Z --json
    expect_rc 0
    expect_json '.intent' '"direct_search"'
    expect_json '.force_tool' '"search_papers"'
    expect_json '.search.count' '5'
    expect_json '.search.year_from' '2022'
    expect_json '.search.year_to' '2026'
    expect_json '.search.open_access_only' 'false'
    expect_json '.search.query' '"social media and academic performance"'
    expect_json '.stage_transition' '"finding_papers"'
    expect_json '.reasons | index("tool_forced") != null' 'true'
}

test_human_output_names_reasons() {
    run "$KEEL" policy explain "Find 10 papers from the last 3 years about CRISPR" --now 2026-02-07
    expect_rc 0
    expect_out "intent:           direct_search"
    expect_out "search.count:     10"
    expect_out "2024 .. 2026"
    expect_out "- year_window"
}

test_keel_now_pins_recency() {
    KEEL_NOW=2019-06-01T00:00:00Z run "$KEEL" policy explain "recent papers on sleep" --json
    expect_rc 0
    expect_json '[.search.year_from, .search.year_to]' '[2015,2019]'
}

test_viewer_still_searches() {
    run "$KEEL" policy explain "find papers on soil carbon" --role viewer --json --now 2026-02-07
    expect_rc 0
    expect_json '.force_tool' '"search_papers"'
}

test_tool_unavailable_keeps_search() {
    run "$KEEL" policy explain "find papers on soil carbon" --tools "" --json --now 2026-02-07
    expect_rc 0
    expect_json '.force_tool' 'null'
    expect_json '.search.query' '"soil carbon"'
    expect_json '.reasons | index("tool_unavailable") != null' 'true'
}

test_unknown_role_is_named() {
    run "$KEEL" policy explain "hi" --role admin
    expect_rc 2
    expect_err "role"
    expect_err "admin"
}

test_unknown_tool_is_named() {
    run "$KEEL" policy explain "hi" --tools search_papers,teleport
    expect_rc 2
    expect_err "tools[1]"
}

test_bad_now_is_named() {
    run "$KEEL" policy explain "hi" --now 2026-13-01
    expect_rc 2
    expect_err "--now"
}

test_missing_pack_is_named() {
    run "$KEEL" policy explain "hi" --pack nosuchpack
    expect_rc 2
    expect_err 'no pack "nosuchpack"'
}

test_pack_name_cannot_escape() {
    run "$KEEL" policy explain "hi" --pack ../etc
    expect_rc 2
    expect_err "not a pack name"
}

test_broken_pack_reports_file_and_line() {
    mkdir -p "$TMP/packs/broken"
    printf 'name: broken\nroles:\n  viewer: [read]\ntools:\n  - {name: x, access: sometimes}\npolicy: {}\n' \
        > "$TMP/packs/broken/pack.yaml"
    run "$KEEL" policy explain "hi" --pack broken --packs "$TMP/packs"
    expect_rc 2
    expect_err "pack.yaml:5:"
    expect_err "read or write"
}

test_duplicate_key_in_pack_names_line() {
    mkdir -p "$TMP/packs/dup"
    printf 'name: dup\nroles:\n  viewer: [read]\n  viewer: [write]\npolicy: {}\n' > "$TMP/packs/dup/pack.yaml"
    run "$KEEL" policy explain "hi" --pack dup --packs "$TMP/packs"
    expect_rc 2
    expect_err "pack.yaml:4:"
    expect_err "duplicate key"
}

test_long_message_is_capped() {
    long=$(head -c 20000 /dev/zero | tr '\0' 'a')
    run "$KEEL" policy explain "find papers on $long" --json --now 2026-02-07
    expect_rc 0
    expect_json '.reasons | index("input_truncated") != null' 'true'
}

test_same_input_same_output() {
    run "$KEEL" policy explain "Search for open access papers on CRISPR since 2020" --json --now 2026-02-07
    first=$OUT
    run "$KEEL" policy explain "Search for open access papers on CRISPR since 2020" --json --now 2026-02-07
    [ "$first" = "$OUT" ] || fail "decisions differ between runs"
}

test_shell_reads_messages() {
    printf 'find recent papers on sleep\n:pack assistant\nconvert 5 km to miles\n' > "$TMP/in"
    run sh -c "KEEL_NOW=2026-02-07 '$KEEL' policy shell < '$TMP/in'"
    expect_rc 0
    expect_out 'search.query:     "sleep"'
    expect_out "route:            conversion_tool"
}

test_invalid_utf8_message_is_rejected() {
    run "$KEEL" policy explain "$(printf 'find papers on caf\377')" --now 2026-02-07
    expect_rc 2
    expect_err "not valid UTF-8"
}

test_utf8_topic_is_kept() {
    run "$KEEL" policy explain "find recent papers on café culture and the ‘third place’" --json --now 2026-02-07
    expect_rc 0
    expect_json '.search.query' '"café culture and the third place"'
}

test_open_ended_years_read_plainly() {
    run "$KEEL" policy explain "find papers on coral since 2019" --now 2026-02-07
    expect_rc 0
    expect_out "search.years:     2019 or later"
    run "$KEEL" policy explain "find papers on coral before 2019" --now 2026-02-07
    expect_out "search.years:     2018 or earlier"
}

test_message_starting_with_dash() {
    run "$KEEL" policy explain -5
    expect_rc 2
    expect_err "goes after '--'"
    run "$KEEL" policy explain --pack assistant -- "-5 km to miles"
    expect_rc 0
    expect_out "conversion_tool"
}

test_clock_before_1900_is_rejected() {
    run "$KEEL" policy explain "recent papers on coral" --now 1800-01-01
    expect_rc 2
    expect_err "now: year 1800"
}

test_shell_commands_are_checked() {
    printf ':role nobody\n:role viewer\n:show\n:frob\n:pack\n' > "$TMP/in"
    run sh -c "'$KEEL' policy shell < '$TMP/in'"
    expect_rc 0
    expect_err ':role: "nobody" is not a role of pack scholar'
    expect_out "role viewer"
    expect_err "unknown shell command :frob"
    expect_err ":pack needs a pack name"
}

test_shell_takes_the_same_options() {
    printf 'find recent papers on coral\n' > "$TMP/in"
    run sh -c "'$KEEL' policy shell --now 2020-01-01 --json < '$TMP/in'"
    expect_rc 0
    expect_json '.search.year_from' '2016'
}

test_debug_log_shows_the_decision() {
    KEEL_LOG_LEVEL=debug run "$KEEL" policy explain "find papers on coral" --now 2026-02-07
    expect_rc 0
    expect_err '"event":"policy.decision"'
    expect_err '"event":"pack.loaded"'
}

test_year_rule_without_its_slot_is_rejected() {
    mkdir -p "$TMP/packs/p"
    printf 'name: p\nroles: {viewer: [read]}\npolicy:\n  years:\n    - {phrase: "since the pandemic", action: since}\n' \
        > "$TMP/packs/p/pack.yaml"
    run "$KEEL" policy explain "hi" --pack p --packs "$TMP/packs"
    expect_rc 2
    expect_err "pack.yaml:5: policy.years[0].phrase: since needs exactly one {year} slot"
}
