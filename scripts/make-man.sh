#!/bin/sh
# make-man.sh BUILDDIR OUTDIR: writes the man pages of the installed programs (section 1)
# and of the configuration file (ftmpi-config.5) into OUTDIR, made from what the programs
# built in BUILDDIR print: --help, each subcommand's --help and ftmpi --help-config.
# The help text is the one description of each program; the pages are generated from it
# rather than written beside it so that they cannot say something else, and
# test/docs/test_man.sh regenerates them to check that the committed doc/man/ pages are
# still what the programs print. POSIX sh and awk only: a build must not need help2man
# or perl. The output depends on nothing but the help text and the version (no date), so
# a regeneration gives the same bytes.
#   make-man.sh build doc/man        (or: make update-man in the build directory)
set -eu
[ $# -eq 2 ] || { echo "usage: make-man.sh BUILDDIR OUTDIR" >&2; exit 2; }
B=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
doc="$here/../doc"
[ -x "$B/ftmpi" ] || { echo "make-man.sh: $B/ftmpi: not built" >&2; exit 1; }
mkdir -p "$out"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/make-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

version=$("$B/ftmpi" --version | sed -n 1p)   # "ftmpi 0.1.0"
# installed programs (bin_PROGRAMS, bin_SCRIPTS), each with the doc/ files about it
tools="ftmpi ftmpi-convert ftmpi-prep ftmpi-generate ftmpi-gendata ftmpi-plot"
docs_of() {
    case $1 in
    ftmpi) echo "user-guide.md config.md design.md planning.md slurm.md formats.md";;
    ftmpi-convert) echo "convert.md formats.md";;
    ftmpi-prep) echo "prep.md tokenizer.md formats.md";;
    ftmpi-generate) echo "generate.md formats.md";;
    ftmpi-config) echo "config.md user-guide.md";;
    *) echo "user-guide.md";;
    esac
}

# help text -> roff, from the NAME section on. Two layouts are understood: the man-like
# one (NAME, SYNOPSIS, ... headings in capitals at column 0, bodies indented) and the
# "Usage: ..." one (a description paragraph, then "Heading:" paragraphs and option lists);
# a one-line help ("PROG ARGS: what it does") is read as synopsis and description.
# In a body, a line starting with "-", or one word followed by two or more spaces, starts
# an item (.TP), its deeper-indented lines continue it; other lines are filled text.
# mode=page writes a page's sections (.SH); mode=sub writes a subcommand's help as one
# .SH with its sections as .SS.
help2roff='
function ind(s) { match(s, /^ */); return RLENGTH }
function trim(s) { sub(/^ +/, "", s); sub(/ +$/, "", s); return s }
function esc(s,   r, i, c) {   # roff: backslash, minus (options stay copyable), control chars
    r = ""
    for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (c == "\\") r = r "\\e"
        else if (c == "-") r = r "\\-"
        else r = r c
    }
    if (r ~ /^[.\047]/) r = "\\&" r
    return r
}
function addsec(h) { ns++; HEAD[ns] = h; FIRST[ns] = nb + 1; LAST[ns] = nb; NOTE[ns] = "" }
function addline(s) { BODY[++nb] = s; LAST[ns] = nb }
function words(s,   a) { return split(s, a, " ") }
# "Heading:" or "Heading: text" at column 0 after a blank line: a capitalised phrase, a
# short one when text follows, so that a sentence with a colon stays text
function is_heading(s,   p, h) {
    p = index(s, ":")
    if (p < 2) return 0
    h = substr(s, 1, p - 1)
    if (h !~ /^[A-Z]/) return 0
    if (p == length(s)) return words(h) <= 8
    return substr(s, p + 1, 1) == " " && words(h) <= 3
}
# an item: an option, or one word then two or more spaces. Right after a line of text,
# only with the spaces before its text: a "-" there may be a wrapped sentence going on
function is_item(s, aftertext) {
    if (aftertext) return s ~ /^-/ && index(s, "  ") > 0
    return s ~ /^-/ || s ~ /^[^ ]+   *[^ ]/
}
function parse_man(   i, h, p) {
    for (i = 1; i <= n; i++) {
        if (L[i] != "" && ind(L[i]) == 0) {
            h = L[i]; p = index(h, " (")
            # "INPUT FORMATS (--format, ...)": the parenthesis becomes the first line
            if (p > 0 && substr(h, 1, p - 1) ~ /^[A-Z ]+$/) {
                addsec(substr(h, 1, p - 1)); NOTE[ns] = substr(h, p + 1)
            } else addsec(h)
        } else if (ns) addline(L[i])
    }
}
function parse_usage(   i, s, p, prevblank, desc) {
    addsec("SYNOPSIS"); addline(substr(L[1], 8))
    for (i = 2; i <= n && L[i] != "" && ind(L[i]) > 0; i++) addline(trim(L[i]))
    addsec("DESCRIPTION")
    prevblank = 1; desc = 0
    for (; i <= n; i++) {
        s = L[i]
        if (s == "") { addline(""); prevblank = 1; continue }
        if (prevblank && desc && ind(s) == 0 && is_heading(s)) {
            p = index(s, ":")
            addsec(substr(s, 1, p - 1))
            if (trim(substr(s, p + 1)) != "") addline(trim(substr(s, p + 1)))
        } else if (prevblank && desc && HEAD[ns] == "DESCRIPTION" && s ~ /^ +-/) {
            addsec("OPTIONS"); addline(s)   # an option list without a heading
        } else addline(s)
        prevblank = 0; desc = 1
    }
}
function parse_line(   p) {
    p = index(L[1], ": ")
    addsec("SYNOPSIS"); addline(p ? substr(L[1], 1, p - 1) : prog)
    addsec("DESCRIPTION"); addline(p ? substr(L[1], p + 2) : L[1])
    for (i = 2; i <= n; i++) addline(L[i])
}
function dedent(k,   i, m, d) {   # remove the common indentation of a section body
    m = -1
    for (i = FIRST[k]; i <= LAST[k]; i++)
        if (BODY[i] != "") { d = ind(BODY[i]); if (m < 0 || d < m) m = d }
    for (i = FIRST[k]; i <= LAST[k]; i++) if (BODY[i] != "") BODY[i] = substr(BODY[i], m + 1)
}
function para(k,   i, s) {   # the first paragraph of a section, joined
    s = ""
    for (i = FIRST[k]; i <= LAST[k]; i++) {
        if (BODY[i] == "") { if (s != "") break; continue }
        s = s (s == "" ? "" : " ") trim(BODY[i])
    }
    return s
}
function verbatim(k,   i, a, z) {
    for (a = FIRST[k]; a <= LAST[k] && BODY[a] == ""; a++) ;
    for (z = LAST[k]; z >= a && BODY[z] == ""; z--) ;
    print ".nf"
    for (i = a; i <= z; i++) print esc(BODY[i])
    print ".fi"
}
# the column where item descriptions start: the most common indentation of the lines
# that continue an item (used for an item line whose tag and text are one space apart)
function desc_col(k,   i, d, cnt, best) {
    best = 0
    for (i = FIRST[k]; i <= LAST[k]; i++) {
        d = ind(BODY[i])
        if (BODY[i] != "" && d > 0 && ++cnt[d] > cnt[best]) best = d
    }
    return best
}
function item(s, c,   p) {   # sets TAG and DESC; c: the description column (0-based)
    p = index(s, "  ")
    if (c > 1 && length(s) > c && substr(s, c, 1) == " " && substr(s, c + 1, 1) != " " &&
        (p == 0 || p > c)) {
        TAG = trim(substr(s, 1, c - 1)); DESC = substr(s, c + 1)
    } else if (p > 0) {
        TAG = substr(s, 1, p - 1); DESC = trim(substr(s, p))
    } else { TAG = s; DESC = "" }
}
function body(k,   i, s, c, sc, gap, started, initem) {
    sc = desc_col(k); gap = 0; started = 0; initem = 1
    if (NOTE[k] != "") { print esc(NOTE[k]); started = 1 }
    for (i = FIRST[k]; i <= LAST[k]; i++) {
        s = BODY[i]
        if (s == "") { gap = 1; continue }
        if (ind(s) == 0 && is_item(s, !gap && !initem)) {
            # a tag list broken over lines ("--a, --b,\n--c   text")
            while (s ~ /,$/ && i < LAST[k] && BODY[i + 1] ~ /^-/) s = s " " BODY[++i]
            c = (i < LAST[k] && BODY[i + 1] != "" && ind(BODY[i + 1]) > 0) ? ind(BODY[i + 1]) : sc
            item(s, c)
            print ".TP"
            print "\\fB" esc(TAG) "\\fR"
            if (DESC != "") print esc(DESC)
            while (i < LAST[k] && BODY[i + 1] != "" && ind(BODY[i + 1]) > 0) print esc(trim(BODY[++i]))
            initem = 1
        } else {
            if (started && (gap || initem)) print ".PP"   # not before the first line
            print esc(trim(s))
            initem = 0
        }
        gap = 0; started = 1
    }
}
function is_verbatim(h) { h = toupper(h); return h == "SYNOPSIS" || h ~ /^EXAMPLES?$/ }
function first_is_option(k,   i) {
    for (i = FIRST[k]; i <= LAST[k]; i++) if (BODY[i] != "") return BODY[i] ~ /^-/
    return 0
}
{ sub(/[ \t]+$/, ""); L[++n] = $0 }
END {
    if (L[1] == "NAME") { style = "man"; parse_man() }
    else if (L[1] ~ /^Usage: /) { style = "usage"; parse_usage() }
    else { style = "line"; parse_line() }
    for (k = 1; k <= ns; k++) dedent(k)
    # NAME: the NAME section ("prog - what"), else the first sentence of the description
    name = prog; what = ""
    for (k = 1; k <= ns; k++) {
        if (HEAD[k] == "NAME") {
            what = para(k); p = index(what, " - ")
            if (p) { name = substr(what, 1, p - 1); what = substr(what, p + 3) }
        }
    }
    if (what == "") {
        for (k = 1; k <= ns && HEAD[k] != "DESCRIPTION"; k++) ;
        what = para(k)
        if (match(what, /[.:]( |$)/)) what = substr(what, 1, RSTART - 1)
        if (what ~ /^[A-Z][a-z]/) what = tolower(substr(what, 1, 1)) substr(what, 2)
    }
    if (mode == "sub") {
        print ".SH " esc(toupper(name))
        print esc(what)
        sh = ".SS "
    } else {
        print ".SH NAME"
        print esc(name) " \\- " esc(what)
        sh = ".SH "
    }
    opts = 0
    for (k = 1; k <= ns; k++) {
        if (HEAD[k] == "NAME") continue
        h = HEAD[k]
        if (style != "man" && first_is_option(k) && toupper(h) != "OPTIONS") {
            # option groups ("Sampling:") as subsections of OPTIONS
            if (!opts) print ".SH OPTIONS"
            opts = 1
            print ".SS " esc(h)
        } else {
            print sh esc(toupper(h))
            if (toupper(h) == "OPTIONS") opts = 1
        }
        if (is_verbatim(h)) verbatim(k); else body(k)
    }
}'

# ftmpi --help-config (a Markdown table: key, type, default, range, meaning) -> the keys
# of ftmpi-config.5, one .TP each, a subsection per group
config2roff='
function md(s) {   # the table cell markup: `code` plain, **strong** bold
    gsub(/`/, "", s)
    while (match(s, /\*\*[^*]+\*\*/))
        s = substr(s, 1, RSTART - 1) "\001" substr(s, RSTART + 2, RLENGTH - 4) "\002" substr(s, RSTART + RLENGTH)
    return s
}
function esc(s,   r, i, c) {
    r = ""
    for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (c == "\\") r = r "\\e"
        else if (c == "-") r = r "\\-"
        else if (c == "\001") r = r "\\fB"
        else if (c == "\002") r = r "\\fR"
        else r = r c
    }
    if (r ~ /^[.\047]/) r = "\\&" r
    return r
}
/^\| `/ {
    n = split($0, f, / \| /)
    if (n != 5) { print "make-man.sh: --help-config: not 5 columns: " $0 > "/dev/stderr"; bad = 1; next }
    key = md(substr(f[1], 3)); type = md(f[2]); def = md(f[3]); range = md(f[4])
    meaning = md(substr(f[5], 1, length(f[5]) - 2))
    group = index(key, ".") ? substr(key, 1, index(key, ".") - 1) : ""
    if (!started || group != last) print ".SS " (group == "" ? "Top\\-level keys" : "The " group " group")
    started = 1; last = group
    # "key = type" as the tag: always wider than the indentation, so it has a line
    print ".TP"
    print "\\fB" esc(key) "\\fR = \\fI" esc(type) "\\fR"
    print (def ~ /^\001/ ? "" : "Default ") esc(def) "; range " esc(range) "."
    print ".br"
    print esc(meaning)
    keys++
}
END { if (bad || keys == 0) exit 1 }'

th() { # NAME SECTION MANUAL: the header of a page
    printf '.\\" Generated by scripts/make-man.sh from %s; do not edit: run make update-man.\n' "$4"
    printf '.TH %s %s "" "%s" "%s"\n' "$(echo "$1" | tr a-z A-Z | sed 's/-/\\-/g')" "$2" "$version" "$3"
    echo ".nh"   # no hyphenation: option and key names must stay whole
}
see_also() { # PAGE: the other pages and the doc/ files about PAGE
    echo ".SH SEE ALSO"
    for p in $tools ftmpi-config; do
        [ "$p" = "$1" ] && continue
        s=1; [ "$p" = ftmpi-config ] && s=5
        printf '.BR %s (%s),\n' "$(echo "$p" | sed 's/-/\\-/g')" "$s"
    done | sed '$s/,$//'
    echo ".PP"
    echo "In the ftmpi source distribution:"
    for d in $(docs_of "$1"); do
        [ -f "$doc/$d" ] || { echo "make-man.sh: doc/$d: no such file" >&2; return 1; }
    done
    for d in $(docs_of "$1"); do
        printf '.BR doc/%s\n' "$(echo "$d" | sed 's/-/\\-/g')"
    done | sed '$!s/$/ ,/'
}

for t in $tools; do
    case $t in ftmpi-plot) exe="$here/$t";; *) exe="$B/$t";; esac
    [ -x "$exe" ] || { echo "make-man.sh: $exe: not found" >&2; exit 1; }
    "$exe" --help > "$tmp/help" 2>&1 || { echo "make-man.sh: $t --help failed" >&2; exit 1; }
    {
        th "$t" 1 "User Commands" "$t --help"
        awk -v prog="$t" -v mode=page "$help2roff" "$tmp/help"
        # subcommands the synopsis shows as "TOOL WORD ...", when they have a help of
        # their own (ftmpi-prep encode --help prints ftmpi-prep's)
        for sub in $(sed -n "s/^ *$t \([a-z][a-z-]*\) .*/\1/p" "$tmp/help" | awk '!seen[$0]++'); do
            [ "$sub" = help ] && continue
            "$exe" "$sub" --help > "$tmp/sub" 2>&1 || { echo "make-man.sh: $t $sub --help failed" >&2; exit 1; }
            cmp -s "$tmp/help" "$tmp/sub" && continue
            awk -v prog="$t $sub" -v mode=sub "$help2roff" "$tmp/sub"
        done
        see_also "$t"
    } > "$tmp/page"
    mv "$tmp/page" "$out/$t.1"
done

"$B/ftmpi" --help-config > "$tmp/config" || { echo "make-man.sh: ftmpi --help-config failed" >&2; exit 1; }
{
    th ftmpi-config 5 "File Formats" "ftmpi --help-config"
    cat <<'EOF'
.SH NAME
ftmpi\-config \- the configuration file of ftmpi
.SH SYNOPSIS
.nf
[mpirun \-np N] ftmpi [OPTIONS] CONFIG [KEY=VALUE ...]
.fi
.SH DESCRIPTION
CONFIG is a libconfig file of settings
.RB ( "name = value;" )
and groups of settings
.RB ( "name = { ... };" ),
with comments after
.B #
or
.B //
and between
.B /*
and
.BR */ .
Each KEY=VALUE argument after it overrides one key with the same checks, the last one
winning: top\-level keys bare
.RB ( max_steps=20 ),
nested ones with their groups
.RB ( optimizer.lr=1e\-4 ).
A key that is not listed below is an error, as is a value of the wrong type or out of
range: one line naming the file and line, or the override.
Integers of 2^31 or more need the L suffix
.RB ( 5000000000L ).
.PP
The keys below are what
.B ftmpi \-\-help\-config
prints.
doc/config.md has them with examples, the syntax in full and the rules that involve
more than one key.
.SH KEYS
EOF
    awk "$config2roff" "$tmp/config"
    see_also ftmpi-config
} > "$tmp/page"
mv "$tmp/page" "$out/ftmpi-config.5"
