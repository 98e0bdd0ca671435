#include "policy/shell.h"

#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace cagent::policy {
namespace {

template <typename Word>
std::string Join(const std::vector<Word>& v) {
  std::string out;
  for (const Word& s : v) {
    if (!out.empty()) out += ',';
    out += s;
  }
  return out;
}

// "env[A=1] argv[make,test] w[out] r[in] ; argv[...]" (empty fields left out), for ShellParse
// and ShellParseView alike.
template <typename Parse>
std::string Render(const Parse& p) {
  std::string out;
  for (const auto& c : p.commands) {
    if (!out.empty()) out += " ; ";
    if (!c.assignments.empty()) out += "env[" + Join(c.assignments) + "] ";
    out += "argv[" + Join(c.argv) + "]";
    if (!c.writes.empty()) out += " w[" + Join(c.writes) + "]";
    if (!c.reads.empty()) out += " r[" + Join(c.reads) + "]";
  }
  return out;
}

struct ParseCase {
  std::string_view script;
  std::string_view expected;
};

std::ostream& operator<<(std::ostream& os, const ParseCase& c) {
  return os << "`" << c.script << "`";
}

class ShellParseTest : public testing::TestWithParam<ParseCase> {};

TEST_P(ShellParseTest, Parses) {
  const ParseCase& c = GetParam();
  ShellParse p = ParseShell(c.script);
  ASSERT_FALSE(p.opaque) << p.opaque_reason;
  EXPECT_TRUE(p.opaque_reason.empty());
  EXPECT_EQ(Render(p), c.expected);
  for (const SimpleCommand& cmd : p.commands) EXPECT_FALSE(cmd.argv.empty());
}

// The engine reads the view parse: every case gives it the same words.
TEST_P(ShellParseTest, ViewsGiveTheSameWords) {
  const ParseCase& c = GetParam();
  ShellParseView v = ParseShellView(c.script);
  ASSERT_FALSE(v.opaque) << v.opaque_reason;
  EXPECT_EQ(Render(v), c.expected);
}

INSTANTIATE_TEST_SUITE_P(
    Words, ShellParseTest,
    testing::Values(
        ParseCase{"make", "argv[make]"}, ParseCase{"  make   test  ", "argv[make,test]"},
        ParseCase{"make\ttest", "argv[make,test]"}, ParseCase{"echo \"x;y\"", "argv[echo,x;y]"},
        ParseCase{"echo 'a'\"b\"c", "argv[echo,abc]"},
        ParseCase{"echo 'a b' \"c d\"", "argv[echo,a b,c d]"}, ParseCase{"echo ''", "argv[echo,]"},
        ParseCase{"echo \"\"", "argv[echo,]"}, ParseCase{"echo 'a\\b'", "argv[echo,a\\b]"},
        ParseCase{"echo '$(x)' '`y`'", "argv[echo,$(x),`y`]"},
        ParseCase{"echo \"a\\\"b\" \"\\\\\" \"\\$x\" \"\\`\"", "argv[echo,a\"b,\\,$x,`]"},
        ParseCase{"echo \"\\a\\n\"", "argv[echo,\\a\\n]"},
        ParseCase{"echo \"\\$(whoami)\"", "argv[echo,$(whoami)]"},
        ParseCase{"echo \\$\\(whoami\\)", "argv[echo,$(whoami)]"},
        ParseCase{"echo a\\ b \\;", "argv[echo,a b,;]"}, ParseCase{"\\rm x", "argv[rm,x]"},
        ParseCase{"'r''m' x", "argv[rm,x]"}, ParseCase{"r\"m\" x", "argv[rm,x]"},
        ParseCase{"echo \\", "argv[echo,\\]"}, ParseCase{"echo $HOME/x", "argv[echo,$HOME/x]"},
        ParseCase{"echo \"$HOME\"/x", "argv[echo,$HOME/x]"},
        ParseCase{"echo ${X}y ${X:-dflt} $1 $@ \"$*\" $? $$ $# $! $-",
                  "argv[echo,${X}y,${X:-dflt},$1,$@,$*,$?,$$,$#,$!,$-]"},
        ParseCase{"echo $ a$ \"$\" $/ $%", "argv[echo,$,a$,$,$/,$%]"},
        ParseCase{"echo \"$'x'\"", "argv[echo,$'x']"},
        ParseCase{"rm *.o ?x [ab]", "argv[rm,*.o,?x,[ab]]"},
        ParseCase{"echo ~ ~/x", "argv[echo,~,~/x]"},
        ParseCase{"find . -exec rm {} +", "argv[find,.,-exec,rm,{},+]"},
        ParseCase{"git log @{u}..HEAD", "argv[git,log,@{u}..HEAD]"},
        ParseCase{"awk '{print $1, $2}' f", "argv[awk,{print $1, $2},f]"},
        ParseCase{"echo '{a,b}' \\{a,b\\}", "argv[echo,{a,b},{a,b}]"},
        ParseCase{"[ -f x ]", "argv[[,-f,x,]]"}, ParseCase{"test -f x", "argv[test,-f,x]"},
        ParseCase{"echo a#b", "argv[echo,a#b]"}, ParseCase{"echo \\#x '#y'", "argv[echo,#x,#y]"},
        ParseCase{"caf\xc3\xa9 \xe2\x9c\x93", "argv[caf\xc3\xa9,\xe2\x9c\x93]"},
        ParseCase{"echo a\rb", "argv[echo,a\rb]"}));

INSTANTIATE_TEST_SUITE_P(
    Separators, ShellParseTest,
    testing::Values(
        ParseCase{"a;b", "argv[a] ; argv[b]"}, ParseCase{"a&&b", "argv[a] ; argv[b]"},
        ParseCase{"a||b", "argv[a] ; argv[b]"}, ParseCase{"a|b", "argv[a] ; argv[b]"},
        ParseCase{"a|&b", "argv[a] ; argv[b]"}, ParseCase{"a&b", "argv[a] ; argv[b]"},
        ParseCase{"a &", "argv[a]"}, ParseCase{"a\nb\n", "argv[a] ; argv[b]"},
        ParseCase{"a ; b && c || d | e & f",
                  "argv[a] ; argv[b] ; argv[c] ; argv[d] ; "
                  "argv[e] ; argv[f]"},
        ParseCase{"a &&\n b", "argv[a] ; argv[b]"}, ParseCase{"make \\\n  test", "argv[make,test]"},
        ParseCase{"ma\\\nke", "argv[make]"}, ParseCase{"echo \"a\\\nb\"", "argv[echo,ab]"},
        ParseCase{"echo 'a\\\nb'", "argv[echo,a\\\nb]"},
        ParseCase{"echo 'a\nb'", "argv[echo,a\nb]"}, ParseCase{"a;;b", "argv[a] ; argv[b]"},
        ParseCase{"; a ;", "argv[a]"}, ParseCase{"", ""}, ParseCase{"   ", ""}, ParseCase{";", ""},
        ParseCase{"\n\n;&", ""}, ParseCase{"# just a comment", ""}, ParseCase{"# a\n\n  # b\n", ""},
        ParseCase{"make # build", "argv[make]"}, ParseCase{"make #", "argv[make]"},
        ParseCase{"make;# x\nmake test", "argv[make] ; argv[make,test]"},
        ParseCase{"# $(rm -rf /)\nls", "argv[ls]"}));

INSTANTIATE_TEST_SUITE_P(
    AssignmentsAndRedirections, ShellParseTest,
    testing::Values(
        ParseCase{"FOO=1 BAR=2 make test", "env[FOO=1,BAR=2] argv[make,test]"},
        ParseCase{"FOO='a b' make", "env[FOO=a b] argv[make]"},
        ParseCase{"FOO=$HOME/x make", "env[FOO=$HOME/x] argv[make]"},
        ParseCase{"A+=x make", "env[A+=x] argv[make]"}, ParseCase{"make FOO=1", "argv[make,FOO=1]"},
        ParseCase{"\"FOO\"=1 make", "argv[FOO=1,make]"},
        ParseCase{"F\\OO=1 make", "argv[FOO=1,make]"},
        ParseCase{"1FOO=1 make", "argv[1FOO=1,make]"}, ParseCase{"=1 make", "argv[=1,make]"},
        ParseCase{"FOO=1 >log BAR=2 make", "env[FOO=1,BAR=2] argv[make] w[log]"},
        // A bare assignment changes every later command's environment.
        ParseCase{"FOO=1", ""},
        ParseCase{"PATH=/tmp/x; git status", "env[PATH=/tmp/x] argv[git,status]"},
        ParseCase{"A=1; B=2 make; c", "env[A=1,B=2] argv[make] ; env[A=1] argv[c]"},
        ParseCase{"export PATH=/x Y; git", "argv[export,PATH=/x,Y] ; env[PATH=/x] argv[git]"},
        ParseCase{"cat < in > out", "argv[cat] w[out] r[in]"},
        ParseCase{">out cmd", "argv[cmd] w[out]"},
        ParseCase{"cmd >>log 2>err", "argv[cmd] w[log,err]"},
        ParseCase{"cmd >| f", "argv[cmd] w[f]"}, ParseCase{"cmd <> f", "argv[cmd] w[f] r[f]"},
        ParseCase{"cmd &> f", "argv[cmd] w[f]"}, ParseCase{"cmd &>> f", "argv[cmd] w[f]"},
        ParseCase{"a b &> f 2>&1; c", "argv[a,b] w[f] ; argv[c]"},
        ParseCase{"cmd >& f", "argv[cmd] w[f]"}, ParseCase{"cmd <& f", "argv[cmd] r[f]"},
        ParseCase{"make 2>&1 | tee log", "argv[make] ; argv[tee,log]"},
        ParseCase{"cmd >&2 2>&- 3<&0 4>&1-", "argv[cmd]"},
        ParseCase{"echo hi 2>&1>out", "argv[echo,hi] w[out]"},
        ParseCase{"echo a>b", "argv[echo,a] w[b]"}, ParseCase{"echo 2>b", "argv[echo] w[b]"},
        ParseCase{"echo \"2\">b", "argv[echo,2] w[b]"}, ParseCase{"echo 2 >b", "argv[echo,2] w[b]"},
        ParseCase{"cmd > 'my file' < '$HOME/in'", "argv[cmd] w[my file] r[$HOME/in]"},
        ParseCase{"cmd > \\~/x < '*'", "argv[cmd] w[~/x] r[*]"},
        ParseCase{"exec 3>log", "argv[exec] w[log]"}));

INSTANTIATE_TEST_SUITE_P(
    Groups, ShellParseTest,
    testing::Values(ParseCase{"(cd sub && make)", "argv[cd,sub] ; argv[make]"},
                    ParseCase{"{ make; make test; }", "argv[make] ; argv[make,test]"},
                    ParseCase{"{ make;}", "argv[make]"},
                    ParseCase{"( (a) ; b ) ; c", "argv[a] ; argv[b] ; argv[c]"},
                    ParseCase{"{ { a; } }", "argv[a]"},
                    ParseCase{"(a; b) > log 2>&1", "argv[a] w[log] ; argv[b] w[log]"},
                    ParseCase{"{ a >x; } < in", "argv[a] w[x] r[in]"},
                    ParseCase{"(a) | (b)", "argv[a] ; argv[b]"},
                    ParseCase{"(\n a\n b\n)", "argv[a] ; argv[b]"},
                    ParseCase{"echo { }", "argv[echo,{,}]"},
                    ParseCase{"{ echo }; }", "argv[echo,}]"},
                    ParseCase{"X=1; (make)", "env[X=1] argv[make]"}));

INSTANTIATE_TEST_SUITE_P(
    NestedShells, ShellParseTest,
    testing::Values(
        ParseCase{"bash -c 'git push'", "argv[bash,-c,git push] ; argv[git,push]"},
        ParseCase{"sh -c \"sh -c 'x'\"", "argv[sh,-c,sh -c 'x'] ; argv[sh,-c,x] ; argv[x]"},
        ParseCase{"/bin/sh -c 'a; b' ; c", "argv[/bin/sh,-c,a; b] ; argv[a] ; argv[b] ; argv[c]"},
        ParseCase{"dash -ec 'a'", "argv[dash,-ec,a] ; argv[a]"},
        ParseCase{"bash -o pipefail -c 'a|b'", "argv[bash,-o,pipefail,-c,a|b] ; argv[a] ; argv[b]"},
        ParseCase{"bash -c -x 'a'", "argv[bash,-c,-x,a] ; argv[a]"},
        ParseCase{"bash --norc -c a", "argv[bash,--norc,-c,a] ; argv[a]"},
        ParseCase{"bash -c 'echo $0 $1' name arg",
                  "argv[bash,-c,echo $0 $1,name,arg] ; argv[echo,$0,$1]"},
        ParseCase{"bash -c -- 'a'", "argv[bash,-c,--,a] ; argv[a]"},
        ParseCase{"bash script.sh -c x", "argv[bash,script.sh,-c,x]"},
        ParseCase{"bash", "argv[bash]"}, ParseCase{"sh -e", "argv[sh,-e]"},
        ParseCase{"zsh -c 'a'", "argv[zsh,-c,a] ; argv[a]"},
        ParseCase{"bash -c ''", "argv[bash,-c,]"},
        ParseCase{"bash -c 'a' | tee log", "argv[bash,-c,a] ; argv[a] ; argv[tee,log]"},
        ParseCase{"sh -c 'sh -c \"sh -c \\\"sh -c x\\\"\"'",
                  "argv[sh,-c,sh -c \"sh -c \\\"sh -c x\\\"\"] ; argv[sh,-c,sh -c \"sh -c x\"] "
                  "; argv[sh,-c,sh -c x] ; argv[sh,-c,x] ; argv[x]"},
        ParseCase{"eval 'a;' b", "argv[eval,a;,b] ; argv[a] ; argv[b]"},
        ParseCase{"trap 'rm -rf x' EXIT", "argv[trap,rm -rf x,EXIT] ; argv[rm,-rf,x]"},
        ParseCase{"trap - EXIT", "argv[trap,-,EXIT]"}, ParseCase{"alias", "argv[alias]"}));

// Wrappers are kept, and the command they run follows as a command of its own.
INSTANTIATE_TEST_SUITE_P(
    Wrappers, ShellParseTest,
    testing::Values(
        ParseCase{"exec make", "argv[exec,make] ; argv[make]"}, ParseCase{"exec", "argv[exec]"},
        ParseCase{"command -v git", "argv[command,-v,git]"},
        ParseCase{"command -pV git", "argv[command,-pV,git]"},
        ParseCase{"command make test", "argv[command,make,test] ; argv[make,test]"},
        ParseCase{"env FOO=1 make", "argv[env,FOO=1,make] ; env[FOO=1] argv[make]"},
        ParseCase{"env", "argv[env]"},
        ParseCase{"env -i A=1 B=2 make -j2",
                  "argv[env,-i,A=1,B=2,make,-j2] ; env[A=1,B=2] argv[make,-j2]"},
        ParseCase{"env - make", "argv[env,-,make] ; argv[make]"},
        ParseCase{"env -u LANG sort", "argv[env,-u,LANG,sort] ; env[LANG=] argv[sort]"},
        ParseCase{"env -uLANG --unset=TZ --unset LC_ALL sort",
                  "argv[env,-uLANG,--unset=TZ,--unset,LC_ALL,sort] ; env[LANG=,TZ=,LC_ALL=] "
                  "argv[sort]"},
        ParseCase{"X=1 env Y=2 make", "env[X=1] argv[env,Y=2,make] ; env[X=1,Y=2] argv[make]"},
        ParseCase{"nice -n 5 make", "argv[nice,-n,5,make] ; argv[make]"},
        ParseCase{"nice -10 make", "argv[nice,-10,make] ; argv[make]"},
        ParseCase{"nice --adjustment=3 make", "argv[nice,--adjustment=3,make] ; argv[make]"},
        ParseCase{"timeout 5 bash -c 'x'", "argv[timeout,5,bash,-c,x] ; argv[bash,-c,x] ; argv[x]"},
        ParseCase{"timeout -s KILL -k5 --preserve-status 1m make",
                  "argv[timeout,-s,KILL,-k5,--preserve-status,1m,make] ; argv[make]"},
        ParseCase{"timeout --signal=TERM 60 ./t", "argv[timeout,--signal=TERM,60,./t] ; argv[./t]"},
        ParseCase{"timeout 60", "argv[timeout,60]"},
        ParseCase{"nohup make > log 2>&1", "argv[nohup,make] w[log] ; argv[make]"},
        ParseCase{"time -p make", "argv[time,-p,make] ; argv[make]"},
        ParseCase{"time -f %e make", "argv[time,-f,%e,make] ; argv[make]"},
        ParseCase{"stdbuf -oL -e0 make", "argv[stdbuf,-oL,-e0,make] ; argv[make]"},
        ParseCase{"ionice -c3 -n7 -t make", "argv[ionice,-c3,-n7,-t,make] ; argv[make]"},
        ParseCase{"ionice -p 42", "argv[ionice,-p,42]"},
        ParseCase{"/usr/bin/timeout 5 ls", "argv[/usr/bin/timeout,5,ls] ; argv[ls]"},
        ParseCase{"nice timeout 5 env X=1 make",
                  "argv[nice,timeout,5,env,X=1,make] ; argv[timeout,5,env,X=1,make] ; "
                  "argv[env,X=1,make] ; env[X=1] argv[make]"},
        ParseCase{"timeout -- 5 make", "argv[timeout,--,5,make] ; argv[make]"}));

struct OpaqueCase {
  std::string_view script;
  std::string_view reason;  // a substring of opaque_reason
};

std::ostream& operator<<(std::ostream& os, const OpaqueCase& c) {
  return os << "`" << c.script << "`";
}

class ShellOpaqueTest : public testing::TestWithParam<OpaqueCase> {};

TEST_P(ShellOpaqueTest, IsOpaque) {
  const OpaqueCase& c = GetParam();
  ShellParse p = ParseShell(c.script);
  EXPECT_TRUE(p.opaque) << Render(p);
  EXPECT_NE(p.opaque_reason.find(c.reason), std::string::npos) << p.opaque_reason;
  EXPECT_TRUE(p.commands.empty()) << Render(p);
  ShellParseView v = ParseShellView(c.script);
  EXPECT_TRUE(v.opaque) << Render(v);
  EXPECT_EQ(v.opaque_reason, p.opaque_reason);
  EXPECT_TRUE(v.commands.empty()) << Render(v);
  EXPECT_TRUE(v.owned.empty());
}

// A wrapper whose command cannot be told from its arguments makes the line opaque.
INSTANTIATE_TEST_SUITE_P(
    Wrappers, ShellOpaqueTest,
    testing::Values(OpaqueCase{"env -S 'make test'", "env -S makes a command line of a string"},
                    OpaqueCase{"env --split-string='a b'", "env --split-string"},
                    OpaqueCase{"env -C /usr/bin ./curl", "env -C runs the command in another"},
                    OpaqueCase{"env -iS x", "env -S"},
                    OpaqueCase{"time -o t.txt make", "time -o writes a file"},
                    OpaqueCase{"time --output=t make", "time --output writes a file"},
                    OpaqueCase{"timeout -x 5 make", "option '-x' is not understood"},
                    OpaqueCase{"timeout --bogus 5 make", "option '--bogus' is not understood"},
                    OpaqueCase{"nice -n", "option '-n' without its argument"},
                    OpaqueCase{"nohup --help", "option '--help' is not understood"},
                    OpaqueCase{"timeout 5 $CMD", "parameter expansion in the command name"},
                    OpaqueCase{"env X=1 ./*.sh", "pathname expansion"},
                    OpaqueCase{"nice nice nice nice nice nice nice nice nice make",
                               "more than 8 wrappers"}));

INSTANTIATE_TEST_SUITE_P(
    Substitutions, ShellOpaqueTest,
    testing::Values(OpaqueCase{"echo $(whoami)", "command substitution $( )"},
                    OpaqueCase{"echo \"$(whoami)\"", "command substitution $( )"},
                    OpaqueCase{"echo \"a$(whoami)b\"", "command substitution $( )"},
                    OpaqueCase{"$(whoami)", "command substitution $( )"},
                    OpaqueCase{"FOO=$(x) make", "command substitution $( )"},
                    OpaqueCase{"make > $(x)", "command substitution $( )"},
                    OpaqueCase{"echo `whoami`", "command substitution `...`"},
                    OpaqueCase{"echo \"`whoami`\"", "command substitution `...`"},
                    OpaqueCase{"echo a`", "command substitution `...`"},
                    OpaqueCase{"echo $((1+2))", "arithmetic expansion $(( ))"},
                    OpaqueCase{"echo \"$((1+2))\"", "arithmetic expansion $(( ))"},
                    OpaqueCase{"echo $[1+2]", "arithmetic expansion $[ ]"},
                    OpaqueCase{"diff <(a) <(b)", "process substitution <( )"},
                    OpaqueCase{"tee >(a)", "process substitution >( )"},
                    OpaqueCase{"cat <<EOF\nhi\nEOF", "here-document <<"},
                    OpaqueCase{"cat <<-EOF\nhi\nEOF", "here-document <<"},
                    OpaqueCase{"cat <<< hi", "here-string <<<"},
                    OpaqueCase{"echo ${X:-$(rm x)}", "parameter expansion ${...}"},
                    OpaqueCase{"echo ${X:-a b}", "parameter expansion ${...}"},
                    OpaqueCase{"echo \"${X:-a b}\"", "parameter expansion ${...}"},
                    OpaqueCase{"echo ${X", "unterminated parameter expansion"},
                    OpaqueCase{"echo ${}", "empty parameter expansion"},
                    OpaqueCase{"echo $'\\x72m'", "ANSI-C quoting"},
                    OpaqueCase{"echo $\"x\"", "locale quoting"},
                    OpaqueCase{"echo {a,b}", "brace expansion"},
                    OpaqueCase{"{rm,-rf,x}", "brace expansion"},
                    OpaqueCase{"echo x{1..3}", "brace expansion"},
                    OpaqueCase{"echo {a,'b c'}", "brace expansion"}));

INSTANTIATE_TEST_SUITE_P(
    CommandName, ShellOpaqueTest,
    testing::Values(OpaqueCase{"$X arg", "parameter expansion in the command name"},
                    OpaqueCase{"${X}", "parameter expansion in the command name"},
                    OpaqueCase{"\"$X\" arg", "parameter expansion in the command name"},
                    OpaqueCase{"/usr/bin/$X", "parameter expansion in the command name"},
                    OpaqueCase{"FOO=1 $X", "parameter expansion in the command name"},
                    OpaqueCase{"a; $1", "parameter expansion in the command name"},
                    OpaqueCase{"/bin/r? x", "pathname expansion"},
                    OpaqueCase{"/bin/r* x", "pathname expansion"},
                    OpaqueCase{"/bin/[r]m x", "pathname expansion"}));

INSTANTIATE_TEST_SUITE_P(
    Keywords, ShellOpaqueTest,
    testing::Values(
        OpaqueCase{"if true; then x; fi", "shell keyword 'if'"},
        OpaqueCase{"for f in *; do rm $f; done", "shell keyword 'for'"},
        OpaqueCase{"while true; do x; done", "shell keyword 'while'"},
        OpaqueCase{"until x; do y; done", "shell keyword 'until'"},
        OpaqueCase{"case x in a) y;; esac", "shell keyword 'case'"},
        OpaqueCase{"select x in a; do y; done", "shell keyword 'select'"},
        OpaqueCase{"function f { x; }", "shell keyword 'function'"},
        OpaqueCase{"coproc x", "shell keyword 'coproc'"}, OpaqueCase{"! x", "shell keyword '!'"},
        OpaqueCase{"a | ! b", "shell keyword '!'"}, OpaqueCase{"[[ -f x ]]", "shell keyword '[['"},
        OpaqueCase{"a && then", "shell keyword 'then'"},
        OpaqueCase{"X=1 { a; }", "shell keyword '{'"},
        OpaqueCase{"f() { x; }", "function definition 'f()'"},
        OpaqueCase{"f () { x; }", "function definition 'f()'"},
        OpaqueCase{"arr=(a b)", "unexpected '('"}, OpaqueCase{"echo (x)", "unexpected '('"},
        OpaqueCase{"((x++))", "arithmetic command (( ))"},
        OpaqueCase{"alias ls='rm -rf'; ls", "alias definitions"}));

INSTANTIATE_TEST_SUITE_P(
    Malformed, ShellOpaqueTest,
    testing::Values(
        OpaqueCase{"echo 'abc", "unterminated single quote"},
        OpaqueCase{"echo \"abc", "unterminated double quote"},
        OpaqueCase{"echo \"abc\\\"", "unterminated double quote"},
        OpaqueCase{"(a", "unbalanced parentheses: missing ')'"},
        OpaqueCase{"a)", "unbalanced parentheses: unexpected ')'"},
        OpaqueCase{"(a))", "unbalanced parentheses: unexpected ')'"},
        OpaqueCase{"{ a;", "unterminated { } group"},
        OpaqueCase{"{ echo }", "unterminated { } group"}, OpaqueCase{"a; }", "unbalanced braces"},
        OpaqueCase{"(a) b", "unexpected word after a ( ) or { } group"},
        OpaqueCase{"(a) (b)", "unexpected '(' after a ( ) or { } group"},
        OpaqueCase{"cmd >", "redirection '>' without a target"},
        OpaqueCase{"cmd > ; x", "redirection '>' without a target"},
        OpaqueCase{"cmd 2>&", "redirection '>&' without a target"},
        OpaqueCase{"> out", "redirection without a command"},
        OpaqueCase{"< in", "redirection without a command"},
        OpaqueCase{"FOO=1 > out", "redirection without a command"},
        OpaqueCase{"(FOO=1) > out", "redirection without a command"},
        OpaqueCase{"cmd {fd}>log", "named file descriptor redirection"},
        OpaqueCase{"echo x > $PWD/.git/config", "expansion ($X, ~, *) in a redirection target"},
        OpaqueCase{"echo x > \"${PWD}\"/f", "expansion ($X, ~, *) in a redirection target"},
        OpaqueCase{"D=.git; echo x > $D/config", "in a redirection target"},
        OpaqueCase{"cat < $HOME/.ssh/config", "in a redirection target"},
        OpaqueCase{"echo x > ~user/.bashrc", "in a redirection target"},
        OpaqueCase{"echo x > ~/.bashrc", "in a redirection target"},
        OpaqueCase{"cat < ~", "in a redirection target"},
        OpaqueCase{"echo x > *.txt", "in a redirection target"},
        OpaqueCase{"(a) > $X", "in a redirection target"},
        OpaqueCase{"a >&$fd", "in a redirection target"},
        OpaqueCase{"a &> f b", "'&>' followed by more words"},
        OpaqueCase{"a &>>f b", "'&>' followed by more words"},
        OpaqueCase{"X=1 &>f a", "'&>' followed by more words"},
        OpaqueCase{std::string_view("echo a\0b", 8), "NUL byte"}));

INSTANTIATE_TEST_SUITE_P(
    NestedStrings, ShellOpaqueTest,
    testing::Values(OpaqueCase{"bash -c 'echo $(id)'", "command substitution $( )"},
                    OpaqueCase{"bash -c 'if x; then y; fi'", "shell keyword 'if'"},
                    OpaqueCase{"bash -c \"echo $HOME\"", "expansion in code run by bash -c"},
                    OpaqueCase{"bash -c $CMD", "expansion in code run by bash -c"},
                    OpaqueCase{"bash -c *", "expansion in code run by bash -c"},
                    OpaqueCase{"sh -c ~", "expansion in code run by sh -c"},
                    OpaqueCase{"bash -c", "bash -c without a command string"},
                    OpaqueCase{"bash -o pipefail -c", "bash -c without a command string"},
                    OpaqueCase{"eval \"$X\"", "expansion in code run by eval"},
                    OpaqueCase{"eval echo *", "expansion in code run by eval"},
                    OpaqueCase{"eval '$(id)'", "command substitution $( )"},
                    OpaqueCase{"trap \"$X\" EXIT", "expansion in code run by trap"},
                    OpaqueCase{"bash -c 'echo \"unterminated'", "unterminated double quote"},
                    OpaqueCase{"sh -c 'sh -c \"sh -c \\\"sh -c \\\\\\\"sh -c x\\\\\\\"\\\"\"'",
                               "nested more than 4 levels"}));

TEST(ShellParseTest, FourLevelsOfNestingIsTheLimit) {
  // Build sh -c "sh -c ..." by quoting the inner script with single quotes at each level.
  auto quote = [](const std::string& s) {
    std::string out = "'";
    for (char c : s) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out += c;
      }
    }
    return out + "'";
  };
  std::string script = "x";
  for (int level = 1; level <= 4; ++level) script = "sh -c " + quote(script);
  ShellParse ok = ParseShell(script);
  ASSERT_FALSE(ok.opaque) << ok.opaque_reason;
  ASSERT_EQ(ok.commands.size(), 5U);
  EXPECT_EQ(ok.commands.back().argv, std::vector<std::string>{"x"});
  ShellParse deep = ParseShell("sh -c " + quote(script));
  EXPECT_TRUE(deep.opaque);
  EXPECT_EQ(deep.opaque_reason,
            "shell code nested more than 4 levels deep (sh -c, eval, trap) cannot be checked");
}

TEST(ShellParseTest, TooLong) {
  std::string script(kMaxShellScript, 'a');
  EXPECT_FALSE(ParseShell(script).opaque);
  script += 'a';
  ShellParse p = ParseShell(script);
  EXPECT_TRUE(p.opaque);
  EXPECT_EQ(p.opaque_reason, "command line too long to check");
  EXPECT_TRUE(p.commands.empty());
}

TEST(ShellParseTest, DeepGroupsAreBounded) {
  std::string script;
  for (int k = 0; k < 10'000; ++k) script += "( ";
  script += "a";
  for (int k = 0; k < 10'000; ++k) script += " )";
  ShellParse p = ParseShell(script);
  EXPECT_TRUE(p.opaque);
  EXPECT_EQ(p.opaque_reason, "( ) or { } groups nested too deep");
  std::string braces;
  for (int k = 0; k < 10'000; ++k) braces += "{ ";
  EXPECT_TRUE(ParseShell(braces).opaque);
  std::string ok = "( ( ( a ) ) )";
  EXPECT_FALSE(ParseShell(ok).opaque);
}

TEST(ShellParseTest, PathologicalInputsFinish) {
  // Large but legal inputs are linear to scan.
  std::string many;
  while (many.size() < kMaxShellScript - 16) many += "a b;";
  ShellParse p = ParseShell(many);
  ASSERT_FALSE(p.opaque) << p.opaque_reason;
  EXPECT_EQ(p.commands.size(), many.size() / 4);
  // Each of these is one long word; none may take quadratic time.
  EXPECT_FALSE(ParseShell(std::string(kMaxShellScript, '\'')).opaque);
  EXPECT_TRUE(ParseShell(std::string(kMaxShellScript - 1, '\'')).opaque);
  EXPECT_FALSE(ParseShell("x" + std::string(kMaxShellScript - 1, '{')).opaque);
  EXPECT_FALSE(ParseShell("x" + std::string(kMaxShellScript - 1, ',')).opaque);
  std::string commas = "x";
  while (commas.size() < kMaxShellScript - 4) commas += "{,";
  EXPECT_TRUE(ParseShell(commas + "}").opaque);
  EXPECT_FALSE(ParseShell(std::string(kMaxShellScript - 2, '"')).opaque);
  EXPECT_FALSE(ParseShell("x " + std::string(kMaxShellScript - 2, '$')).opaque);
}

TEST(ShellParseTest, OutputGrowthIsBounded) {
  // Group redirections are copied into every command of the group: 10k commands x 10k targets.
  std::string group = "(";
  for (int k = 0; k < 10'000; ++k) group += "a;";
  group += ")";
  for (int k = 0; k < 10'000; ++k) group += ">f";
  ShellParse p = ParseShell(group);
  EXPECT_TRUE(p.opaque);
  EXPECT_EQ(p.opaque_reason, "command line too complex to check");
  // Bare assignments are carried into every later command.
  std::string sticky;
  for (int k = 0; k < 5'000; ++k) sticky += "V" + std::to_string(k) + "=1;";
  for (int k = 0; k < 5'000; ++k) sticky += "a;";
  p = ParseShell(sticky);
  EXPECT_TRUE(p.opaque);
  EXPECT_EQ(p.opaque_reason, "command line too complex to check");
  // Re-assigning one variable does not grow anything.
  std::string same;
  for (int k = 0; k < 5'000; ++k) same += "V=" + std::to_string(k) + ";a;";
  p = ParseShell(same);
  ASSERT_FALSE(p.opaque) << p.opaque_reason;
  EXPECT_EQ(p.commands.back().assignments, std::vector<std::string>{"V=4999"});
  std::string dollars;
  while (dollars.size() < kMaxShellScript - 8) dollars += "${a}";
  EXPECT_TRUE(ParseShell(dollars).opaque);  // parameter expansion in the command name
}

TEST(ShellParseTest, StructuredFields) {
  ShellParse p = ParseShell("A=1 B='x y' cmd --flag \"arg 2\" <in >out 2>>err");
  ASSERT_FALSE(p.opaque);
  ASSERT_EQ(p.commands.size(), 1U);
  const SimpleCommand& c = p.commands[0];
  EXPECT_EQ(c.argv, (std::vector<std::string>{"cmd", "--flag", "arg 2"}));
  EXPECT_EQ(c.assignments, (std::vector<std::string>{"A=1", "B=x y"}));
  EXPECT_EQ(c.writes, (std::vector<std::string>{"out", "err"}));
  EXPECT_EQ(c.reads, (std::vector<std::string>{"in"}));
}

// Where a view parse's words live: a word written as one piece is a view into the script, one
// put together from pieces (quotes, escapes) a string of its own; both read the same.
bool InScript(std::string_view script, std::string_view word) {
  return word.data() >= script.data() && word.data() + word.size() <= script.data() + script.size();
}

TEST(ShellParseViewTest, WordsOfOnePieceAreViewsIntoTheScript) {
  const std::string script =
      "make -j2 'a b' \"c d\" $HOME/x \"$X\" ${Y}z a\\ b 'x'y \"p\"'q'r e\\\nf '' \"\" >out";
  ShellParseView v = ParseShellView(script);
  ASSERT_FALSE(v.opaque) << v.opaque_reason;
  ASSERT_EQ(v.commands.size(), 1U);
  const std::vector<std::string_view>& argv = v.commands[0].argv;
  const std::vector<std::string_view> expected = {
      "make", "-j2", "a b", "c d", "$HOME/x", "$X", "${Y}z", "a b", "xy", "pqr", "ef", "", ""};
  EXPECT_EQ(argv, expected);
  ASSERT_EQ(argv.size(), expected.size());
  for (std::size_t k = 0; k < 7; ++k) EXPECT_TRUE(InScript(script, argv[k])) << argv[k];
  for (std::size_t k = 7; k < 11; ++k) EXPECT_FALSE(InScript(script, argv[k])) << argv[k];
  EXPECT_EQ(v.commands[0].writes, std::vector<std::string_view>{"out"});
  EXPECT_TRUE(InScript(script, v.commands[0].writes[0]));
  // a\ b, 'x'y, "p"'q'r and e\<newline>f each needed a string of their own.
  EXPECT_EQ(std::distance(v.owned.begin(), v.owned.end()), 4);
}

TEST(ShellParseViewTest, OwnedWordsSurviveAMove) {
  const std::string script = "F\\OO=1 a'b'c \"x\"\\ y; eval 'p;' \"q r\"; sh -c 'm\"n\"o'";
  ShellParseView v = ParseShellView(script);
  ASSERT_FALSE(v.opaque) << v.opaque_reason;
  const std::string before = Render(v);
  EXPECT_EQ(before,
            "argv[FOO=1,abc,x y] ; argv[eval,p;,q r] ; argv[p] ; argv[q,r] ; argv[sh,-c,m\"n\"o] ; "
            "argv[mno]");
  ShellParseView moved = std::move(v);
  const std::vector<std::string> filler(64, std::string(100, '#'));  // reuses freed memory, if any
  EXPECT_EQ(Render(moved), before);
  EXPECT_EQ(Render(ParseShell(script)), before);
}

TEST(ShellParseViewTest, TheSameAsParseShellForMixedWords) {
  // Words that mix quoted, escaped and plain parts, empty parts, and ones that only look like an
  // assignment or an io number once quotes are removed.
  const std::vector<std::pair<std::string_view, std::string_view>> cases = {
      {"a''b ''a b'' '''' \"\"\"\" ''\"\"x", "argv[ab,a,b,,,x]"},
      {"A=''1 B=\"\"2 C=3'' D='' cmd", "env[A=1,B=2,C=3,D=] argv[cmd]"},
      {"\"A\"=1 A\\=1 A'=1' cmd", "argv[A=1,A=1,A=1,cmd]"},
      {"x 2'>'f 2\\>f '2'>f \"\"2>f 2>f", "argv[x,2>f,2>f,2,2] w[f,f,f]"},
      {"echo \\\\ \\' \\\" \"\\\\\" \"a\\b\" '\\'", "argv[echo,\\,',\",\\,a\\b,\\]"},
      {"echo ab\\\ncd \"ab\\\ncd\" a\\\n\\\nb", "argv[echo,abcd,abcd,ab]"},
      {"echo $ \"$\" '$'$ a$/'b' $1'x' \"$@\"y", "argv[echo,$,$,$$,a$/b,$1x,$@y]"},
      {"cat <'in'put >o\\ut 2>>'e'\"r\"r <>rw", "argv[cat] w[out,err,rw] r[input,rw]"},
      {"(a'b' c\"d\") >'g'1 ; { e\\f; } <i'n'", "argv[ab,cd] w[g1] ; argv[ef] r[in]"},
      {"export P=/x'y' Q=\"a b\"; cmd", "argv[export,P=/xy,Q=a b] ; env[P=/xy,Q=a b] argv[cmd]"},
      {"bash -c 'x'\"y\"'; z' && trap 'r''m f' EXIT",
       "argv[bash,-c,xy; z] ; argv[xy] ; argv[z] ; argv[trap,rm f,EXIT] ; argv[rm,f]"},
  };
  for (const auto& [script, expected] : cases) {
    const std::string own(script);
    ShellParse p = ParseShell(own);
    ShellParseView v = ParseShellView(own);
    ASSERT_FALSE(p.opaque) << script << ": " << p.opaque_reason;
    EXPECT_FALSE(v.opaque) << script;
    EXPECT_EQ(Render(p), expected) << script;
    EXPECT_EQ(Render(v), expected) << script;
  }
}

}  // namespace
}  // namespace cagent::policy
