# The binary's surface: usage, version, unknown commands.

test_no_arguments_prints_usage() {
    run "$KEEL"
    expect_rc 2
    expect_err "usage: keel"
}

test_help_lists_commands() {
    run "$KEEL" --help
    expect_rc 0
    expect_out "policy"
    expect_out "replay"
}

test_version() {
    run "$KEEL" version
    expect_rc 0
    expect_out "keel "
}

test_unknown_command() {
    run "$KEEL" frobnicate
    expect_rc 2
    expect_err 'unknown command "frobnicate"'
}

test_bad_keel_now_is_named() {
    KEEL_NOW=yesterday run "$KEEL" policy explain "hi"
    expect_rc 2
    expect_err "KEEL_NOW"
}

# Every command's --help has one layout: "usage: keel CMD …" first, then
# prose, then its options two spaces in, descriptions in one column
# (continuation lines indented to it). keel chat and keel memory list each
# option on one line, all together, and every option the usage line names.
test_help_layout_is_the_same_for_every_command() {
    for cmd in policy replay ingest chat serve keys search memory; do
        run "$KEEL" $cmd --help
        expect_rc 0
        printf '%s\n' "$OUT" | head -n 1 | grep -q "^usage: keel $cmd " ||
            fail "$cmd: first line: $(printf '%s\n' "$OUT" | head -n 1)"
        # the column where each option's description starts, and where
        # each continuation line starts
        cols=$(printf '%s\n' "$OUT" | LC_ALL=C awk '
            /^  -/ { s = substr($0, 3); i = index(s, "  "); t = substr(s, i);
                     match(t, /^ +/); print 2 + i - 1 + RLENGTH; opt = 1; next }
            opt && /^   +[^ ]/ { match($0, /^ +/); print RLENGTH; next }
            { opt = 0 }' | sort -u)
        [ -n "$cols" ] || [ "$cmd" = replay ] || [ "$cmd" = keys ] || fail "$cmd: no options listed"
        [ "$(printf '%s\n' "$cols" | grep -c .)" -le 1 ] || fail "$cmd: options not aligned: $cols"
    done
    for cmd in chat memory; do
        run "$KEEL" $cmd --help
        printf '%s\n' "$OUT" | LC_ALL=C awk '
            /^  -/ { if (ended) bad = 1; seen = 1; next }
            seen && /^ +[^ ]/ { cont = 1 }
            seen && !/^  -/ { ended = 1 }
            length($0) > 88 { long = 1 }
            END { exit bad || cont || long }' ||
            fail "$cmd: options are not one line each, together, within 88 columns"
        for opt in $(printf '%s\n' "$OUT" | sed -n '/^usage:/,/^$/p' | grep -o -- '--[a-z-]*' | sort -u); do
            printf '%s\n' "$OUT" | grep -q -- "^  $opt[ ,]" || fail "$cmd: $opt is not in the options"
        done
    done
}
