#include "policy/match/shell.h"

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

// Render plus what runs each command, its pipeline place, its stdin and whether it reads code or
// gets more arguments.
template <typename Parse>
std::string RenderFull(const Parse& p) {
  std::string out;
  for (const auto& c : p.commands) {
    if (!out.empty()) out += " ; ";
    if (!c.assignments.empty()) out += "env[" + Join(c.assignments) + "] ";
    out += "argv[" + Join(c.argv) + "]";
    if (!c.writes.empty()) out += " w[" + Join(c.writes) + "]";
    if (!c.reads.empty()) out += " r[" + Join(c.reads) + "]";
    if (!c.run_by.empty()) out += " by[" + std::string(c.run_by) + "]";
    if (c.pipeline != 0) {
      out += " p" + std::to_string(c.pipeline) + "." + std::to_string(c.stage);
    }
    switch (c.stdin_from) {
      case StdinSource::kInherited:
        break;
      case StdinSource::kPipe:
        out += " in[pipe]";
        break;
      case StdinSource::kFile:
        out += " in[file]";
        break;
      case StdinSource::kHereDocument:
        out += " in[<<]";
        break;
      case StdinSource::kHereString:
        out += " in[<<<]";
        break;
    }
    if (c.stdin_is_code) out += " code";
    if (c.more_args) out += " more";
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
        ParseCase{"find . -exec rm {} +", "argv[find,.,-exec,rm,{},+] ; argv[rm,{}]"},
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

class ShellReadTest : public testing::TestWithParam<ParseCase> {};

TEST_P(ShellReadTest, Parses) {
  const ParseCase& c = GetParam();
  ShellParse p = ParseShell(c.script);
  ASSERT_FALSE(p.opaque) << p.opaque_reason;
  EXPECT_EQ(RenderFull(p), c.expected);
  for (const SimpleCommand& cmd : p.commands) EXPECT_FALSE(cmd.argv.empty());
  ShellParseView v = ParseShellView(c.script);
  ASSERT_FALSE(v.opaque) << v.opaque_reason;
  EXPECT_EQ(RenderFull(v), c.expected);
}

// Compound commands: their commands are listed; a for loop carries its variable as "NAME=";
// redirections after done/fi/esac apply to every command inside.
INSTANTIATE_TEST_SUITE_P(
    Compound, ShellReadTest,
    testing::Values(
        ParseCase{"if true; then make; fi", "argv[true] ; argv[make]"},
        ParseCase{"if a; then b; elif c; then d; elif e; then f; else g; fi",
                  "argv[a] ; argv[b] ; argv[c] ; argv[d] ; argv[e] ; argv[f] ; argv[g]"},
        ParseCase{"if a\nthen\n  b\nfi", "argv[a] ; argv[b]"},
        ParseCase{"if (a) then b; fi", "argv[a] ; argv[b]"},
        ParseCase{"if { a; } then b; fi", "argv[a] ; argv[b]"},
        ParseCase{"while true; do make; done", "argv[true] ; argv[make]"},
        ParseCase{"until make; do sleep 1; done", "argv[make] ; argv[sleep,1]"},
        ParseCase{"while a; do b; done > log 2>&1", "argv[a] w[log] ; argv[b] w[log]"},
        ParseCase{"for f in a b; do rm $f; done", "env[f=] argv[rm,$f]"},
        ParseCase{"for f in; do x; done", "env[f=] argv[x]"},
        ParseCase{"for f do echo $f; done", "env[f=] argv[echo,$f]"},
        ParseCase{"for f\nin a\ndo echo $f\ndone", "env[f=] argv[echo,$f]"},
        ParseCase{"for PATH in ./bin; do git status; done", "env[PATH=] argv[git,status]"},
        ParseCase{"for f in *.py $X \"$(ls)\"; do python3 $f; done",
                  "argv[ls] by[$( )] ; env[f=] argv[python3,$f]"},
        ParseCase{"for i in 1 2; do for j in a b; do echo $i$j; done; done; echo $i",
                  "env[i=,j=] argv[echo,$i$j] ; env[i=,j=] argv[echo,$i]"},
        ParseCase{"case $x in a) echo a;; b|c) echo bc;; (*) echo other;; esac",
                  "argv[echo,a] ; argv[echo,bc] ; argv[echo,other]"},
        ParseCase{"case x in\n  a)\n    echo a\n    ;;\n  *) echo b\nesac",
                  "argv[echo,a] ; argv[echo,b]"},
        ParseCase{"case x in a) echo a;& b) echo b;;& c) echo c;; esac",
                  "argv[echo,a] ; argv[echo,b] ; argv[echo,c]"},
        ParseCase{"case x in esac", ""},
        ParseCase{"case $(uname) in Linux) echo l;; esac", "argv[uname] by[$( )] ; argv[echo,l]"},
        ParseCase{"case x in $(whoami)) echo y;; esac", "argv[whoami] by[$( )] ; argv[echo,y]"},
        ParseCase{"case x in a) echo;; esac > out", "argv[echo] w[out]"},
        ParseCase{"! git diff --quiet", "argv[git,diff,--quiet]"},
        ParseCase{"a | ! b", "argv[a] p1.0 ; argv[b] p1.1 in[pipe]"},
        ParseCase{"! ! a && ! { b; }", "argv[a] ; argv[b]"},
        ParseCase{"echo if then else fi do done case esac for while { } !",
                  "argv[echo,if,then,else,fi,do,done,case,esac,for,while,{,},!]"},
        ParseCase{"if true; then if false; then a; fi; fi", "argv[true] ; argv[false] ; argv[a]"},
        ParseCase{"while read l; do case $l in *.c) gcc -c \"$l\";; esac; done < files",
                  "argv[read,l] r[files] in[file] ; env[l=] argv[gcc,-c,$l] r[files] in[file]"}));

// [[ ]] is one test command; outside bash -c the sh (dash) reading is listed too.
INSTANTIATE_TEST_SUITE_P(
    Test, ShellReadTest,
    testing::Values(
        ParseCase{"[[ -f x ]]", "argv[[[,-f,x,]]]"},
        ParseCase{"[[ -f x && -d y ]] && echo ok",
                  "argv[[[,-f,x,&&,-d,y,]]] ; argv[[[,-f,x] by[[[ (sh)] ; argv[-d,y,]]] by[[[ "
                  "(sh)] ; argv[echo,ok]"},
        ParseCase{"[[ a || b ]]",
                  "argv[[[,a,||,b,]]] ; argv[[[,a] by[[[ (sh)] ; argv[b,]]] by[[[ (sh)]"},
        ParseCase{"[[ a < b ]]", "argv[[[,a,<,b,]]] ; argv[[[,a,]]] r[b] by[[[ (sh)] in[file]"},
        ParseCase{"[[ ( -f x ) ]]", "argv[[[,(,-f,x,),]]]"},
        ParseCase{"[[ -n $(git status --short) ]]",
                  "argv[git,status,--short] by[$( )] ; argv[[[,-n,$(git status --short),]]]"},
        ParseCase{"bash -c '[[ $n -eq 3 && ${#a[@]} -gt 0 && $((n+1)) -le 9 ]]'",
                  "argv[bash,-c,[[ $n -eq 3 && ${#a[@]} -gt 0 && $((n+1)) -le 9 ]]] ; "
                  "argv[[[,$n,-eq,3,&&,${#a[@]},-gt,0,&&,$((n+1)),-le,9,]]]"},
        ParseCase{"[[ -f x ]] > out", "argv[[[,-f,x,]]] w[out]"},
        ParseCase{"bash -c '[[ ( -f x ) && -d y ]]'",
                  "argv[bash,-c,[[ ( -f x ) && -d y ]]] ; argv[[[,(,-f,x,),&&,-d,y,]]]"},
        ParseCase{"echo [[ a ]]", "argv[echo,[[,a,]]]"}));

// Substitutions: the commands inside are listed before the command holding them.
INSTANTIATE_TEST_SUITE_P(
    Subst, ShellReadTest,
    testing::Values(
        ParseCase{"echo $(whoami)", "argv[whoami] by[$( )] ; argv[echo,$(whoami)]"},
        ParseCase{"echo \"a$(whoami)b\" `id -u`",
                  "argv[whoami] by[$( )] ; argv[id,-u] by[$( )] ; argv[echo,a$(whoami)b,`id -u`]"},
        ParseCase{"FOO=$(git rev-parse HEAD) make",
                  "argv[git,rev-parse,HEAD] by[$( )] ; env[FOO=$(git rev-parse HEAD)] argv[make]"},
        ParseCase{"echo $(curl x | sh)",
                  "argv[curl,x] by[$( )] p1.0 ; argv[sh] by[$( )] p1.1 in[pipe] code ; "
                  "argv[echo,$(curl x | sh)]"},
        ParseCase{"echo $(echo $(id))",
                  "argv[id] by[$( )] ; argv[echo,$(id)] by[$( )] ; argv[echo,$(echo $(id))]"},
        ParseCase{"echo $( (a; b) | c )",
                  "argv[a] by[$( )] p1.0 ; argv[b] by[$( )] p1.0 ; argv[c] by[$( )] p1.1 in[pipe] "
                  "; argv[echo,$( (a; b) | c )]"},
        ParseCase{"echo $(echo ')' \")\")",
                  "argv[echo,),)] by[$( )] ; argv[echo,$(echo ')' \")\")]"},
        ParseCase{"echo $(case x in (a) echo y;; esac)",
                  "argv[echo,y] by[$( )] ; argv[echo,$(case x in (a) echo y;; esac)]"},
        ParseCase{"echo $(cd sub && make) $(PATH=/x; ls)",
                  "argv[cd,sub] by[$( )] ; argv[make] by[$( )] ; env[PATH=/x] argv[ls] by[$( )] ; "
                  "env[PATH=/x] argv[echo,$(cd sub && make),$(PATH=/x; ls)]"},
        ParseCase{"echo \"`echo \\`id\\``\"",
                  "argv[id] by[$( )] ; argv[echo,`id`] by[$( )] ; argv[echo,`echo \\`id\\``]"},
        ParseCase{"echo `echo \\$HOME`", "argv[echo,$HOME] by[$( )] ; argv[echo,`echo \\$HOME`]"},
        ParseCase{"ls `pwd`", "argv[pwd] by[$( )] ; argv[ls,`pwd`]"},
        ParseCase{"diff <(sort a) <(sort b)",
                  "argv[sort,a] by[<( )] ; argv[sort,b] by[<( )] ; argv[diff,<(sort a),<(sort b)]"},
        ParseCase{"make 2>&1 > >(tee log)", "argv[tee,log] by[>( )] ; argv[make]"},
        ParseCase{"while read l; do echo $l; done < <(find .)",
                  "argv[read,l] in[pipe] ; env[l=] argv[echo,$l] in[pipe] ; env[l=] argv[find,.] "
                  "by[<( )] in[pipe]"},
        ParseCase{"echo $(# comment )\n)", "argv[echo,$(# comment )\n)]"},
        ParseCase{"X=`cmd`; echo $X", "argv[cmd] by[$( )] ; env[X=`cmd`] argv[echo,$X]"},
        ParseCase{"echo '$(id)' \"\\$(id)\"", "argv[echo,$(id),$(id)]"}));

// Arithmetic on numbers, operators and trusted names; names it assigns are carried.
INSTANTIATE_TEST_SUITE_P(
    Arith, ShellReadTest,
    testing::Values(
        ParseCase{"echo $((40+2))", "argv[echo,$((40+2))]"},
        ParseCase{"echo \"$(( (1 << 4) % 3 ? x : ${y} ))\" $[2**3] $((16#ff)) $((0x1F))",
                  "argv[echo,$(( (1 << 4) % 3 ? x : ${y} )),$[2**3],$((16#ff)),$((0x1F))]"},
        ParseCase{"echo $((i++)); ls", "env[i=] argv[echo,$((i++))] ; env[i=] argv[ls]"},
        ParseCase{"echo $((PATH=1)); ls",
                  "env[PATH=] argv[echo,$((PATH=1))] ; env[PATH=] argv[ls]"},
        ParseCase{"n=3; echo $((n*2))", "env[n=3] argv[echo,$((n*2))]"},
        ParseCase{"for i in 1 2 3; do echo $((i*i)); done", "env[i=] argv[echo,$((i*i))]"},
        ParseCase{"git log --oneline | head -$(( 5 * 2 ))",
                  "argv[git,log,--oneline] p1.0 ; argv[head,-$(( 5 * 2 ))] p1.1 in[pipe]"},
        ParseCase{"let n=1 'm = n + 2'; echo $m",
                  "argv[let,n=1,m = n + 2] ; env[m=,n=] argv[echo,$m]"},
        ParseCase{"echo $(( $# + $? ))", "argv[echo,$(( $# + $? ))]"},
        ParseCase{"echo ${a[n]} ${s:1:k}", "argv[echo,${a[n]},${s:1:k}]"},
        ParseCase{"declare a[1]=x; unset 'a[1]'",
                  "argv[declare,a[1]=x] ; env[a[1]=x] argv[unset,a[1]]"},
        ParseCase{"[ \"$x\" -eq 1 ]", "argv[[,$x,-eq,1,]]"}));

// Here-documents and here-strings: stdin data, or code for a shell that reads its stdin.
INSTANTIATE_TEST_SUITE_P(
    HereDoc, ShellReadTest,
    testing::Values(
        ParseCase{"cat <<EOF\nhello $USER\nEOF", "argv[cat] in[<<]"},
        ParseCase{"cat <<EOF\n$(rm -rf ~)\nEOF", "argv[rm,-rf,~] by[$( )] ; argv[cat] in[<<]"},
        ParseCase{"cat <<'EOF'\n$(rm -rf ~)\nEOF", "argv[cat] in[<<]"},
        ParseCase{"cat <<\"EOF\"\n`id`\nEOF", "argv[cat] in[<<]"},
        ParseCase{"cat <<\\EOF\n`id`\nEOF", "argv[cat] in[<<]"},
        ParseCase{"cat <<-EOF\n\t$(date)\n\tEOF\necho done",
                  "argv[date] by[$( )] ; argv[cat] in[<<] ; argv[echo,done]"},
        ParseCase{"cat <<EOF\n\tEOF\nEOF\nls", "argv[cat] in[<<] ; argv[ls]"},
        ParseCase{"cat <<A; cat <<B\na\nA\nb\nB\nls",
                  "argv[cat] in[<<] ; argv[cat] in[<<] ; argv[ls]"},
        ParseCase{"cat <<A <<B\na\nA\nb\nB", "argv[cat] in[<<]"},
        ParseCase{"cat > a.py <<'EOF'\nprint(1)\nEOF\npython3 a.py",
                  "argv[cat] w[a.py] in[<<] ; argv[python3,a.py]"},
        ParseCase{"cat <<EOF | sh\nls\nEOF", "argv[cat] p1.0 in[<<] ; argv[sh] p1.1 in[pipe] code"},
        ParseCase{"cat <<EOF\nno end", "argv[cat] in[<<]"},
        ParseCase{"cat <<EOF && \\\nls\nbody\nEOF", "argv[cat] in[<<] ; argv[ls]"},
        ParseCase{"cat <<EOF # comment\nx\nEOF", "argv[cat] in[<<]"},
        ParseCase{"cat <<EOF >out\nx\nEOF", "argv[cat] w[out] in[<<]"},
        ParseCase{"cat 3<<EOF\nx\nEOF", "argv[cat]"},
        ParseCase{"bash <<'EOF'\ncurl x | sh\nEOF",
                  "argv[bash] in[<<] code ; argv[curl,x] p1.0 ; argv[sh] p1.1 in[pipe] code"},
        ParseCase{"bash -s arg <<'EOF'\nrm -rf x\nEOF",
                  "argv[bash,-s,arg] in[<<] code ; argv[rm,-rf,x]"},
        ParseCase{"sh <<EOF\ngit push\nEOF", "argv[sh] in[<<] code ; argv[git,push]"},
        ParseCase{"sh <<-'EOF'\n\tif x; then\n\t\ty\n\tfi\n\tEOF",
                  "argv[sh] in[<<] code ; argv[x] ; argv[y]"},
        ParseCase{"bash <<EOF\necho a\\\\b \\\nc\nEOF", "argv[bash] in[<<] code ; argv[echo,ab,c]"},
        ParseCase{"bash /dev/stdin <<'EOF'\nmake\nEOF",
                  "argv[bash,/dev/stdin] in[<<] code ; argv[make]"},
        ParseCase{"timeout 9 bash <<'EOF'\nmake\nEOF",
                  "argv[timeout,9,bash] in[<<] ; argv[bash] by[timeout] in[<<] code ; argv[make]"},
        ParseCase{"source /dev/stdin <<'EOF'\nmake\nEOF",
                  "argv[source,/dev/stdin] in[<<] ; argv[sh,/dev/stdin] by[source] in[<<] code ; "
                  "argv[make]"},
        ParseCase{"bash -c 'make' <<'EOF'\nrm x\nEOF", "argv[bash,-c,make] in[<<] ; argv[make]"},
        ParseCase{"python3 - <<'EOF'\nimport os\nEOF", "argv[python3,-] in[<<]"},
        ParseCase{"python3 -c \"$(cat <<'EOF'\nprint(1)\nEOF\n)\"",
                  "argv[cat] by[$( )] in[<<] ; argv[python3,-c,$(cat <<'EOF'\nprint(1)\nEOF\n)]"},
        ParseCase{"cat <<< hi", "argv[cat] in[<<<]"},
        ParseCase{"cat <<< \"$(date)\"", "argv[date] by[$( )] ; argv[cat] in[<<<]"},
        ParseCase{"bash <<< 'git push'", "argv[bash] in[<<<] code ; argv[git,push]"},
        ParseCase{"bash 3<<< 'git push'", "argv[bash] code"},
        ParseCase{"bash <<'EOF' <&3\nls\nEOF", "argv[bash] code"},
        ParseCase{"bash <<'EOF' < f\nls\nEOF", "argv[bash] r[f] in[file] code"}));

// Brace expansion: the expanded words (bash) and the words as written (dash).
INSTANTIATE_TEST_SUITE_P(
    Brace, ShellReadTest,
    testing::Values(
        ParseCase{"git {push,status}", "argv[git,push,status] ; argv[git,{push,status}]"},
        ParseCase{"echo {a,b}{c,d} x{1..3}y",
                  "argv[echo,ac,ad,bc,bd,x1y,x2y,x3y] ; argv[echo,{a,b}{c,d},x{1..3}y]"},
        ParseCase{"echo {a,'b c'} {\"x\",y}z",
                  "argv[echo,a,b c,xz,yz] ; argv[echo,{a,b c},{x,y}z]"},
        ParseCase{
            "echo {a,{b,c}} {x{a,b}} {{a,b} {a}",
            "argv[echo,a,b,c,{xa},{xb},{a,{b,{a}] ; argv[echo,{a,{b,c}},{x{a,b}},{{a,b},{a}]"},
        ParseCase{"echo {01..03} {a..c} {c..a} {1..9..4} {-1..1} {5..1..2}",
                  "argv[echo,01,02,03,a,b,c,c,b,a,1,5,9,-1,0,1,5,3,1] ; "
                  "argv[echo,{01..03},{a..c},{c..a},{1..9..4},{-1..1},{5..1..2}]"},
        ParseCase{
            "mkdir -p src/{a,b} && touch src/{a,b}/__init__.py",
            "argv[mkdir,-p,src/a,src/b] ; argv[mkdir,-p,src/{a,b}] ; "
            "argv[touch,src/a/__init__.py,src/b/__init__.py] ; argv[touch,src/{a,b}/__init__.py]"},
        ParseCase{"bash -c 'echo {a,b}'", "argv[bash,-c,echo {a,b}] ; argv[echo,a,b]"},
        ParseCase{"echo \\{a,b} '{a,b}' {a\\,b} {} {x} ${X} a{,}",
                  "argv[echo,{a,b},{a,b},{a,b},{},{x},${X},a,a] ; "
                  "argv[echo,{a,b},{a,b},{a,b},{},{x},${X},a{,}]"},
        ParseCase{"X={a,b} cmd", "env[X={a,b}] argv[cmd]"},
        ParseCase{"for f in {a,b}; do echo $f; done", "env[f=] argv[echo,$f]"},
        ParseCase{"git log @{u}..HEAD", "argv[git,log,@{u}..HEAD]"}));

// read, mapfile, getopts, printf -v: the names they set are carried as "NAME=".
INSTANTIATE_TEST_SUITE_P(
    Readers, ShellReadTest,
    testing::Values(
        ParseCase{"read -r line; echo \"$line\"",
                  "argv[read,-r,line] ; env[line=] argv[echo,$line]"},
        ParseCase{"read; ls", "argv[read] ; env[REPLY=] argv[ls]"},
        ParseCase{"read -p 'name? ' -t 5 -a arr x; ls",
                  "argv[read,-p,name? ,-t,5,-a,arr,x] ; env[arr=,x=] argv[ls]"},
        ParseCase{"read -rd '' x y", "argv[read,-rd,,x,y]"},
        ParseCase{"IFS= read -r PATH; git status",
                  "env[IFS=] argv[read,-r,PATH] ; env[PATH=] argv[git,status]"},
        ParseCase{"mapfile -t lines < f; echo ${lines[0]}",
                  "argv[mapfile,-t,lines] r[f] in[file] ; env[lines=] argv[echo,${lines[0]}]"},
        ParseCase{"readarray; ls", "argv[readarray] ; env[MAPFILE=] argv[ls]"},
        ParseCase{"getopts ab: opt; ls",
                  "argv[getopts,ab:,opt] ; env[opt=,OPTARG=,OPTIND=] argv[ls]"},
        ParseCase{"printf -v out '%s' x; ls", "argv[printf,-v,out,%s,x] ; env[out=] argv[ls]"},
        ParseCase{"printf '%s' x; ls", "argv[printf,%s,x] ; argv[ls]"},
        ParseCase{"export A=1 B=$x; declare -r C='a[1]'; ls",
                  "argv[export,A=1,B=$x] ; env[A=1,B=$x] argv[declare,-r,C=a[1]] ; "
                  "env[A=1,B=$x,C=a[1]] argv[ls]"}));

// Commands run by xargs, find -exec and source are commands of their own.
INSTANTIATE_TEST_SUITE_P(
    Runners, ShellReadTest,
    testing::Values(
        ParseCase{"find . -name '*.py' | xargs grep -n foo",
                  "argv[find,.,-name,*.py] p1.0 ; argv[xargs,grep,-n,foo] p1.1 in[pipe] ; "
                  "argv[grep,-n,foo] by[xargs] p1.1 in[pipe] more"},
        ParseCase{"xargs", "argv[xargs] ; argv[echo] by[xargs] more"},
        ParseCase{"xargs -0 -r -t -p -x -o -n 1 -P4 -s 100 -d '\\n' -E END -L 2 rm",
                  "argv[xargs,-0,-r,-t,-p,-x,-o,-n,1,-P4,-s,100,-d,\\n,-E,END,-L,2,rm] ; argv[rm] "
                  "by[xargs] more"},
        ParseCase{"xargs -0rn1 -P 4 echo",
                  "argv[xargs,-0rn1,-P,4,echo] ; argv[echo] by[xargs] more"},
        ParseCase{"xargs -e -eEND -i -ifoo -l -l3 echo",
                  "argv[xargs,-e,-eEND,-i,-ifoo,-l,-l3,echo] ; argv[echo] by[xargs]"},
        ParseCase{"xargs --null --no-run-if-empty --verbose --interactive --exit --open-tty "
                  "--show-limits --eof --eof=E --max-lines --max-lines=2 --max-args=1 --max-args 1 "
                  "--max-procs=2 --max-chars=9 --delimiter=x echo",
                  "argv[xargs,--null,--no-run-if-empty,--verbose,--interactive,--exit,--open-tty,--"
                  "show-limits,--eof,--eof=E,--max-lines,--max-lines=2,--max-args=1,--max-args,1,--"
                  "max-procs=2,--max-chars=9,--delimiter=x,echo] ; argv[echo] by[xargs] more"},
        ParseCase{"xargs -a list -- rm -f",
                  "argv[xargs,-a,list,--,rm,-f] r[list] ; argv[rm,-f] by[xargs] more"},
        ParseCase{"xargs --arg-file=l echo",
                  "argv[xargs,--arg-file=l,echo] r[l] ; argv[echo] by[xargs] more"},
        ParseCase{"xargs -I{} mv {} {}.bak",
                  "argv[xargs,-I{},mv,{},{}.bak] ; argv[mv,{},{}.bak] by[xargs]"},
        ParseCase{"xargs --replace cp {} /tmp",
                  "argv[xargs,--replace,cp,{},/tmp] ; argv[cp,{},/tmp] by[xargs]"},
        ParseCase{"xargs -i cp {} /tmp", "argv[xargs,-i,cp,{},/tmp] ; argv[cp,{},/tmp] by[xargs]"},
        ParseCase{"ls | xargs --process-slot-var=PATH git status",
                  "argv[ls] p1.0 ; argv[xargs,--process-slot-var=PATH,git,status] p1.1 in[pipe] ; "
                  "env[PATH=] argv[git,status] by[xargs] p1.1 in[pipe] more"},
        ParseCase{"xargs --help", "argv[xargs,--help]"}, ParseCase{"xargs -v", "argv[xargs,-v]"},
        ParseCase{"xargs sh -c 'echo \"$@\"' _",
                  "argv[xargs,sh,-c,echo \"$@\",_] ; argv[sh,-c,echo \"$@\",_] by[xargs] more ; "
                  "argv[echo,$@]"},
        ParseCase{"xargs timeout 5 make",
                  "argv[xargs,timeout,5,make] ; argv[timeout,5,make] by[xargs] more ; argv[make] "
                  "by[timeout] more"},
        ParseCase{
            "xargs -I{} xargs echo",
            "argv[xargs,-I{},xargs,echo] ; argv[xargs,echo] by[xargs] ; argv[echo] by[xargs] more"},
        ParseCase{"find . -exec rm -rf {} +",
                  "argv[find,.,-exec,rm,-rf,{},+] ; argv[rm,-rf,{}] by[find -exec]"},
        ParseCase{"find . -type f -exec grep -l x {} + -o -execdir chmod 644 {} \\; -ok rm {} \\; "
                  "-okdir ls \\;",
                  "argv[find,.,-type,f,-exec,grep,-l,x,{},+,-o,-execdir,chmod,644,{},;,-ok,rm,{},;,"
                  "-okdir,ls,;] ; argv[grep,-l,x,{}] by[find -exec] ; argv[chmod,644,{}] by[find "
                  "-exec] ; argv[rm,{}] by[find -exec] ; argv[ls] by[find -exec]"},
        ParseCase{"find . -exec echo + \\;",
                  "argv[find,.,-exec,echo,+,;] ; argv[echo,+] by[find -exec]"},
        ParseCase{"find . -exec sh -c 'echo \"$1\"' _ {} \\;",
                  "argv[find,.,-exec,sh,-c,echo \"$1\",_,{},;] ; argv[sh,-c,echo \"$1\",_,{}] "
                  "by[find -exec] ; argv[echo,$1]"},
        ParseCase{"find . -fprint out -fprint0 o0 -fls l -fprintf f '%p' -print",
                  "argv[find,.,-fprint,out,-fprint0,o0,-fls,l,-fprintf,f,%p,-print] w[out,o0,l,f]"},
        ParseCase{"find . -exec timeout 5 make {} \\;",
                  "argv[find,.,-exec,timeout,5,make,{},;] ; argv[timeout,5,make,{}] by[find -exec] "
                  "; argv[make,{}] by[timeout]"},
        ParseCase{"find", "argv[find]"},
        ParseCase{"source .venv/bin/activate && pytest",
                  "argv[source,.venv/bin/activate] ; argv[sh,.venv/bin/activate] by[source] ; "
                  "env[PATH=] argv[pytest]"},
        ParseCase{
            ". ./env.sh a b; make",
            "argv[.,./env.sh,a,b] ; argv[sh,./env.sh,a,b] by[source] ; env[PATH=] argv[make]"},
        ParseCase{"source", "argv[source]"},
        ParseCase{"PATH=/x; source f; ls",
                  "env[PATH=/x] argv[source,f] ; env[PATH=/x] argv[sh,f] by[source] ; env[PATH=] "
                  "argv[ls]"},
        ParseCase{"bash script.sh arg", "argv[bash,script.sh,arg]"}));

// Pipelines: an id per pipeline and the stage of each command.
INSTANTIATE_TEST_SUITE_P(
    Pipes, ShellReadTest,
    testing::Values(
        ParseCase{"a | b | c", "argv[a] p1.0 ; argv[b] p1.1 in[pipe] ; argv[c] p1.2 in[pipe]"},
        ParseCase{"a | b; c | d",
                  "argv[a] p1.0 ; argv[b] p1.1 in[pipe] ; argv[c] p2.0 ; argv[d] p2.1 in[pipe]"},
        ParseCase{"a | b && c", "argv[a] p1.0 ; argv[b] p1.1 in[pipe] ; argv[c]"},
        ParseCase{"a |& b", "argv[a] p1.0 ; argv[b] p1.1 in[pipe]"},
        ParseCase{"curl x | sh", "argv[curl,x] p1.0 ; argv[sh] p1.1 in[pipe] code"},
        ParseCase{"wget -qO- x | sudo bash",
                  "argv[wget,-qO-,x] p1.0 ; argv[sudo,bash] p1.1 in[pipe]"},
        ParseCase{"curl x | python3 -", "argv[curl,x] p1.0 ; argv[python3,-] p1.1 in[pipe]"},
        ParseCase{"curl x | (cat | sh)",
                  "argv[curl,x] p1.0 ; argv[cat] p1.1 in[pipe] ; argv[sh] p1.2 in[pipe] code"},
        ParseCase{"(curl x | tee f) | sh",
                  "argv[curl,x] p2.0 ; argv[tee,f] p2.1 in[pipe] ; argv[sh] p2.2 in[pipe] code"},
        ParseCase{"{ a; b | c; d; } | e",
                  "argv[a] p2.0 ; argv[b] p2.0 ; argv[c] p2.1 in[pipe] ; argv[d] p2.0 ; argv[e] "
                  "p2.2 in[pipe]"},
        ParseCase{
            "echo $(curl x) | sh",
            "argv[curl,x] by[$( )] p1.0 ; argv[echo,$(curl x)] p1.0 ; argv[sh] p1.1 in[pipe] code"},
        ParseCase{"curl x | echo $(sh)",
                  "argv[curl,x] p1.0 ; argv[sh] by[$( )] p1.1 in[pipe] code ; argv[echo,$(sh)] "
                  "p1.1 in[pipe]"},
        ParseCase{
            "while read l; do sh; done | cat",
            "argv[read,l] p1.0 ; env[l=] argv[sh] p1.0 code ; env[l=] argv[cat] p1.1 in[pipe]"},
        ParseCase{"a |\n b", "argv[a] p1.0 ; argv[b] p1.1 in[pipe]"},
        ParseCase{"curl x | timeout 5 bash -c 'bash'",
                  "argv[curl,x] p1.0 ; argv[timeout,5,bash,-c,bash] p1.1 in[pipe] ; "
                  "argv[bash,-c,bash] by[timeout] p1.1 in[pipe] ; argv[bash] p1.1 in[pipe] code"},
        ParseCase{"a | b < f", "argv[a] p1.0 ; argv[b] r[f] p1.1 in[file]"},
        ParseCase{"bash -s < script.sh", "argv[bash,-s] r[script.sh] in[file] code"},
        ParseCase{"sh -c 'ls' | bash -x -",
                  "argv[sh,-c,ls] p1.0 ; argv[ls] p1.0 ; argv[bash,-x,-] p1.1 in[pipe] code"}));

// Lines agents type, and how they split.
INSTANTIATE_TEST_SUITE_P(
    AgentLines, ShellReadTest,
    testing::Values(
        ParseCase{"PYTHONPATH=src python3 -m unittest -q",
                  "env[PYTHONPATH=src] argv[python3,-m,unittest,-q]"},
        ParseCase{"for f in *.c; do gcc -c $f; done", "env[f=] argv[gcc,-c,$f]"},
        ParseCase{"source .venv/bin/activate && pytest",
                  "argv[source,.venv/bin/activate] ; argv[sh,.venv/bin/activate] by[source] ; "
                  "env[PATH=] argv[pytest]"},
        ParseCase{"find . -name '*.py' | xargs grep -n foo",
                  "argv[find,.,-name,*.py] p1.0 ; argv[xargs,grep,-n,foo] p1.1 in[pipe] ; "
                  "argv[grep,-n,foo] by[xargs] p1.1 in[pipe] more"},
        ParseCase{"echo $((40+2))", "argv[echo,$((40+2))]"},
        ParseCase{"cat > a.py <<'EOF'\nprint(1)\nEOF\npython3 a.py",
                  "argv[cat] w[a.py] in[<<] ; argv[python3,a.py]"},
        ParseCase{"if [ -f x ]; then make; else echo no; fi",
                  "argv[[,-f,x,]] ; argv[make] ; argv[echo,no]"},
        ParseCase{"while read f; do echo \"$f\"; done < list.txt",
                  "argv[read,f] r[list.txt] in[file] ; env[f=] argv[echo,$f] r[list.txt] in[file]"},
        ParseCase{"python3 -c \"$(cat <<'EOF'\nprint(1)\nEOF\n)\"",
                  "argv[cat] by[$( )] in[<<] ; argv[python3,-c,$(cat <<'EOF'\nprint(1)\nEOF\n)]"},
        ParseCase{"git log --oneline | head -$(( 5 * 2 ))",
                  "argv[git,log,--oneline] p1.0 ; argv[head,-$(( 5 * 2 ))] p1.1 in[pipe]"},
        ParseCase{"[[ -f x && -d y ]] && echo ok",
                  "argv[[[,-f,x,&&,-d,y,]]] ; argv[[[,-f,x] by[[[ (sh)] ; argv[-d,y,]]] by[[[ "
                  "(sh)] ; argv[echo,ok]"},
        ParseCase{"case $1 in a|b) echo ab;; *) echo other;; esac",
                  "argv[echo,ab] ; argv[echo,other]"},
        ParseCase{
            "mkdir -p src/{a,b} && touch src/{a,b}/__init__.py",
            "argv[mkdir,-p,src/a,src/b] ; argv[mkdir,-p,src/{a,b}] ; "
            "argv[touch,src/a/__init__.py,src/b/__init__.py] ; argv[touch,src/{a,b}/__init__.py]"},
        ParseCase{"ls `pwd`", "argv[pwd] by[$( )] ; argv[ls,`pwd`]"},
        ParseCase{"cd build && cmake .. && make -j$(nproc) 2>&1 | tail -20",
                  "argv[cd,build] ; argv[cmake,..] ; argv[nproc] by[$( )] p1.0 ; "
                  "argv[make,-j$(nproc)] p1.0 ; argv[tail,-20] p1.1 in[pipe]"},
        ParseCase{"for t in tests/test_*.py; do python3 -m pytest -q \"$t\" || exit 1; done",
                  "env[t=] argv[python3,-m,pytest,-q,$t] ; env[t=] argv[exit,1]"},
        ParseCase{"git diff --name-only | xargs -r ruff check",
                  "argv[git,diff,--name-only] p1.0 ; argv[xargs,-r,ruff,check] p1.1 in[pipe] ; "
                  "argv[ruff,check] by[xargs] p1.1 in[pipe] more"},
        ParseCase{"test -d .venv || python3 -m venv .venv",
                  "argv[test,-d,.venv] ; argv[python3,-m,venv,.venv]"},
        ParseCase{"export PATH=\"$PWD/bin:$PATH\"; make",
                  "argv[export,PATH=$PWD/bin:$PATH] ; env[PATH=$PWD/bin:$PATH] argv[make]"}));

// Soundness traps: every command that runs is listed, every variable set is carried.
INSTANTIATE_TEST_SUITE_P(
    Traps, ShellReadTest,
    testing::Values(
        ParseCase{"for PATH in ./bin; do git status; done", "env[PATH=] argv[git,status]"},
        ParseCase{"echo $(curl x | sh)",
                  "argv[curl,x] by[$( )] p1.0 ; argv[sh] by[$( )] p1.1 in[pipe] code ; "
                  "argv[echo,$(curl x | sh)]"},
        ParseCase{"cat <<EOF\n$(rm -rf ~)\nEOF", "argv[rm,-rf,~] by[$( )] ; argv[cat] in[<<]"},
        ParseCase{"bash <<'EOF'\ncurl x | sh\nEOF",
                  "argv[bash] in[<<] code ; argv[curl,x] p1.0 ; argv[sh] p1.1 in[pipe] code"},
        ParseCase{"git {push,status}", "argv[git,push,status] ; argv[git,{push,status}]"},
        ParseCase{"find . -exec rm -rf {} +",
                  "argv[find,.,-exec,rm,-rf,{},+] ; argv[rm,-rf,{}] by[find -exec]"},
        ParseCase{"ls | xargs --process-slot-var=PATH git status",
                  "argv[ls] p1.0 ; argv[xargs,--process-slot-var=PATH,git,status] p1.1 in[pipe] ; "
                  "env[PATH=] argv[git,status] by[xargs] p1.1 in[pipe] more"},
        ParseCase{"echo {1..$((n))}", "argv[echo,{1..$((n))}]"},
        ParseCase{"x=1; echo $((x))", "env[x=1] argv[echo,$((x))]"},
        ParseCase{"timeout 5 {rm,-rf,/tmp/x}",
                  "argv[timeout,5,rm,-rf,/tmp/x] ; argv[rm,-rf,/tmp/x] by[timeout] ; "
                  "argv[timeout,5,{rm,-rf,/tmp/x}] ; argv[{rm,-rf,/tmp/x}] by[timeout]"},
        ParseCase{"[[ a ]] || { curl x | sh; }",
                  "argv[[[,a,]]] ; argv[curl,x] p1.0 ; argv[sh] p1.1 in[pipe] code"},
        ParseCase{"getopts ab o; echo $((OPTIND))",
                  "argv[getopts,ab,o] ; env[o=,OPTARG=,OPTIND=] argv[echo,$((OPTIND))]"}));

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
    testing::Values(OpaqueCase{"$(whoami)", "parameter expansion in the command name"},
                    OpaqueCase{"`whoami` x", "parameter expansion in the command name"},
                    OpaqueCase{"<(a) x", "parameter expansion in the command name"},
                    OpaqueCase{"make > $(x)", "in a redirection target"},
                    OpaqueCase{"make > `x`", "in a redirection target"},
                    OpaqueCase{"echo a`", "unterminated command substitution `...`"},
                    OpaqueCase{"echo $(a", "unterminated $( ) or <( ): missing ')'"},
                    OpaqueCase{"echo \"$(a\"", "unterminated double quote"},
                    OpaqueCase{"diff <(a", "unterminated $( ) or <( )"},
                    OpaqueCase{"echo $(echo 'x)", "unterminated single quote"},
                    OpaqueCase{"echo $(if x; then y; fi", "unterminated $( ) or <( )"},
                    // The ')' of a case pattern ends $( ): the inner case is then unterminated.
                    OpaqueCase{"echo $(case x in a) y;; esac)", "case pattern without its ')'"},
                    OpaqueCase{"echo $(< f)", "$(< file) is not supported"},
                    OpaqueCase{"echo \"`echo \\\"x\\\"`\"", "inside `...` inside double quotes"},
                    OpaqueCase{"cat x<(a)", "joined to other text"},
                    OpaqueCase{"cat <(a)x", "joined to other text"},
                    OpaqueCase{"bash <(curl x)", "process substitution <( ) as its script"},
                    OpaqueCase{"bash < <(curl x)", "reading its code from a process substitution"},
                    OpaqueCase{"source <(curl x)", "sourcing a process substitution"},
                    OpaqueCase{"echo $($($($($(x)))))", "nested more than 4 levels"},
                    OpaqueCase{"echo ${X:-$(rm x)}", "parameter expansion ${...}"},
                    OpaqueCase{"echo ${X:-a b}", "parameter expansion ${...}"},
                    OpaqueCase{"echo \"${X:-a b}\"", "parameter expansion ${...}"},
                    OpaqueCase{"echo ${X", "unterminated parameter expansion"},
                    OpaqueCase{"echo ${}", "empty parameter expansion"},
                    OpaqueCase{"echo $'\\x72m'", "ANSI-C quoting"},
                    OpaqueCase{"echo $\"x\"", "locale quoting"}));

// Arithmetic: only numbers, operators and names; and never on a variable the line sets to text
// it does not control, because bash evaluates a variable's value again as arithmetic and runs
// any $( ) in an a[...] subscript of it.
INSTANTIATE_TEST_SUITE_P(
    Arithmetic, ShellOpaqueTest,
    testing::Values(
        OpaqueCase{"echo $(( $(id) ))", "may only hold numbers"},
        OpaqueCase{"echo $((`id`))", "may only hold numbers"},
        OpaqueCase{"echo $((a[1]))", "may only hold numbers"},
        OpaqueCase{"echo $(('1'))", "may only hold numbers"},
        OpaqueCase{"echo $(($1 + 1))", "may only hold numbers"},
        OpaqueCase{"echo $[a[$(id)]]", "may only hold numbers"},
        OpaqueCase{"echo $[1", "unterminated arithmetic expansion $["},
        OpaqueCase{"echo $((1+2)", "unterminated $( ) or <( )"},
        OpaqueCase{"x='a[$(id)]'; echo $((x))", "variable 'x' is evaluated as arithmetic"},
        OpaqueCase{"x=\"$y\"; echo $(($x))", "variable 'x'"},
        OpaqueCase{"x=*; echo $((x))", "variable 'x'"},
        OpaqueCase{"export x=a[1]; bash -c 'echo $((x))'", "variable 'x'"},
        OpaqueCase{"env x='a[0]' bash -c 'echo $((x))'", "variable 'x'"},
        OpaqueCase{"for x in *; do echo $((x)); done", "variable 'x'"},
        OpaqueCase{"for x in $L; do echo $((x)); done", "variable 'x'"},
        OpaqueCase{"for x in 'a[1]'; do echo $((x)); done", "variable 'x'"},
        OpaqueCase{"for x; do echo $((x)); done", "variable 'x'"},
        // A use before the setting still counts: loops run it again.
        OpaqueCase{"while echo $((x)); do read x; done", "variable 'x'"},
        OpaqueCase{"read x; echo $((x+1))", "variable 'x'"},
        OpaqueCase{"read -r a b; let b++", "variable 'b'"},
        OpaqueCase{"mapfile n; echo $((n))", "variable 'n'"},
        OpaqueCase{"getopts ab o; echo $((OPTARG))", "variable 'OPTARG'"},
        OpaqueCase{"printf -v n %s \"$1\"; echo $[n]", "variable 'n'"},
        OpaqueCase{"read i; echo ${arr[i]}", "variable 'i'"},
        OpaqueCase{"read i; echo ${s:i:1}", "variable 'i'"},
        OpaqueCase{"read r; echo ${!r}", "variable 'r'"},
        OpaqueCase{"read i; [[ $i -eq 1 ]]", "variable 'i'"},
        OpaqueCase{"[[ $(cat n) -gt 0 ]]", "may only hold numbers"},
        OpaqueCase{"[[ 'a[$(id)]' -eq 0 ]]", "may only hold numbers"},
        OpaqueCase{"[[ -v 'a[$(id)]' ]]", "may only hold numbers"},
        OpaqueCase{"test -v 'a[$(id)]'", "may only hold numbers"},
        OpaqueCase{"let 'a[$(id)]'", "may only hold numbers"},
        OpaqueCase{"declare 'a[$(id)]=1'", "may only hold numbers"},
        OpaqueCase{"unset 'a[$(id)]'", "may only hold numbers"},
        OpaqueCase{"read 'a[$(id)]'", "read into 'a[$(id)]': only plain variable names"},
        OpaqueCase{"read $v", "only plain variable names"},
        OpaqueCase{"printf -v 'a[1]' x", "only plain variable names"},
        OpaqueCase{"declare -i n", "declare -i and -n"},
        OpaqueCase{"local -n r=x", "declare -i and -n"},
        OpaqueCase{"mapfile -C 'rm x' -c 1 a", "mapfile -C runs its callback"}));

// Brace expansion beyond its bounds, or where bash's result depends on its algorithm's details.
INSTANTIATE_TEST_SUITE_P(
    Braces, ShellOpaqueTest,
    testing::Values(OpaqueCase{"{rm,-rf,x}", "brace expansion {a,b} in the command name"},
                    OpaqueCase{"x{a,b} y", "brace expansion {a,b} in the command name"},
                    OpaqueCase{"echo {1..65}", "more than 64 words"},
                    OpaqueCase{"echo {a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}", "more than 64 words"},
                    OpaqueCase{"echo {1..{3,}}", "more than 64 words, or nested"},
                    OpaqueCase{"echo {a,$(id)}", "brace expansion {a,b} in a word with $( )"},
                    OpaqueCase{"echo {a,b}$((n))", "brace expansion {a,b} in a word with"},
                    OpaqueCase{"cat > {a,b}", "in a redirection target"}));

// xargs, find -exec, source: what they run must be known.
INSTANTIATE_TEST_SUITE_P(
    CommandRunners, ShellOpaqueTest,
    testing::Values(
        OpaqueCase{"xargs --frob echo", "option '--frob' is not understood"},
        OpaqueCase{"xargs --nu echo", "option '--nu' is not understood"},
        OpaqueCase{"xargs -Z echo", "option '-Z' is not understood"},
        OpaqueCase{"xargs -n", "option '-n' without its argument"},
        OpaqueCase{"xargs --max-args", "without its argument"},
        OpaqueCase{"xargs --null=1 echo", "takes no argument"},
        OpaqueCase{"xargs env", "'xargs' would run 'env' with the command taken from its input"},
        OpaqueCase{"xargs nice", "would run 'nice'"},
        OpaqueCase{"xargs timeout 5", "would run 'timeout'"},
        OpaqueCase{"xargs xargs", "would run 'xargs'"},
        OpaqueCase{"xargs sh", "with a script named by its input"},
        OpaqueCase{"xargs -n1 bash -x", "with a script named by its input"},
        OpaqueCase{"xargs find .", "expressions (-exec ...) taken from its input"},
        OpaqueCase{"xargs -I{} {} x", "built from its input"},
        OpaqueCase{"xargs -I % sh -c 'echo %'", "expansion in code run by sh -c"},
        OpaqueCase{"xargs $CMD", "parameter expansion in the command name"},
        OpaqueCase{"xargs -a ~/list echo", "in the file of xargs -a"},
        OpaqueCase{"xargs --process-slot-var=a[1] echo", "not a plain variable name"},
        OpaqueCase{"find . -exec rm {}", "find -exec without its terminating ';' or '+'"},
        OpaqueCase{"find . -exec rm {} x +", "without its terminating"},
        OpaqueCase{"find . -exec \\;", "find -exec without a command"},
        OpaqueCase{"find . -exec {} \\;", "a found file name"},
        OpaqueCase{"find . -execdir sh -c 'rm {}' \\;", "expansion in code run by sh -c"},
        OpaqueCase{"find . -exec env {} +", "parameter expansion in the command name"},
        OpaqueCase{"find . -fprint $OUT", "in the file of find -fprint"},
        OpaqueCase{"find . -exec $X \\;", "a found file name"}));

// Here-documents and here-strings read as shell code.
INSTANTIATE_TEST_SUITE_P(
    HereDocuments, ShellOpaqueTest,
    testing::Values(OpaqueCase{"bash <<EOF\necho $HOME\nEOF", "unquoted delimiter and $ or `"},
                    OpaqueCase{"sh <<EOF\n`id`\nEOF", "unquoted delimiter and $ or `"},
                    OpaqueCase{"bash <<< \"$X\"", "expansion in code run by bash <<<"},
                    OpaqueCase{"bash <<< ~/x", "expansion in code run by bash <<<"},
                    OpaqueCase{"bash <<'EOF'\nif x\nEOF", "unterminated if"},
                    OpaqueCase{"{ bash; } <<'EOF'\nls\nEOF",
                               "a shell inside a ( ) or { } group reads"},
                    OpaqueCase{"bash -c bash <<'EOF'\nls\nEOF", "a shell inside bash -c reads"},
                    OpaqueCase{"cat <<", "here-document '<<' without a delimiter"},
                    OpaqueCase{"cat << ;", "here-document '<<' without a delimiter"},
                    OpaqueCase{"cat <<$X\n$X", "here-document delimiter with $"},
                    OpaqueCase{"echo $(cat <<EOF)\nx\nEOF", "must end before the ')'"},
                    OpaqueCase{"cat <<EOF\n$(rm x\nEOF\n", "unterminated $( ) or <( )"},
                    OpaqueCase{"cat <<EOF\n$(echo\nEOF\n)", "runs past its end"},
                    OpaqueCase{"cat <<EOF\n${x:-a b}\nEOF", "parameter expansion ${...}"}));

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
    testing::Values(OpaqueCase{"select x in a; do y; done", "shell keyword 'select'"},
                    OpaqueCase{"function f { x; }", "shell keyword 'function'"},
                    OpaqueCase{"coproc x", "shell keyword 'coproc'"},
                    OpaqueCase{"a && then", "unexpected shell keyword 'then'"},
                    OpaqueCase{"fi", "unexpected shell keyword 'fi'"},
                    OpaqueCase{"echo; done", "unexpected shell keyword 'done'"},
                    OpaqueCase{"X=1 { a; }", "shell keyword '{'"},
                    OpaqueCase{"X=1 if x; then y; fi", "shell keyword 'if'"},
                    OpaqueCase{"f() { x; }", "function definition 'f()'"},
                    OpaqueCase{"f () { x; }", "function definition 'f()'"},
                    OpaqueCase{"arr=(a b)", "unexpected '('"},
                    OpaqueCase{"echo (x)", "unexpected '('"},
                    OpaqueCase{"((x++))", "arithmetic command (( ))"},
                    OpaqueCase{"for ((i=0; i<3; i++)); do x; done", "arithmetic for loop"},
                    OpaqueCase{"alias ls='rm -rf'; ls", "alias definitions"}));

// Compound commands that do not end, or are not well formed.
INSTANTIATE_TEST_SUITE_P(
    Compound, ShellOpaqueTest,
    testing::Values(
        OpaqueCase{"if x", "unterminated if: missing 'then'"},
        OpaqueCase{"if x; then y", "unterminated if: missing 'fi'"},
        OpaqueCase{"if x; then y; else z", "unterminated if: missing 'fi'"},
        OpaqueCase{"if x; then y; elif z", "unterminated if: missing 'then'"},
        OpaqueCase{"if x; then y; done", "unexpected shell keyword 'done'"},
        OpaqueCase{"while x", "unterminated loop: missing 'do'"},
        OpaqueCase{"while x; do y", "unterminated loop: missing 'done'"},
        OpaqueCase{"until x; do y; fi", "unexpected shell keyword 'fi'"},
        OpaqueCase{"for x in a b", "a for loop's words must end with ';'"},
        OpaqueCase{"for x in a; y", "for loop without 'do'"},
        OpaqueCase{"for x in a; do y", "unterminated loop: missing 'done'"},
        OpaqueCase{"for 'x' in a; do y; done", "a for loop's variable must be a plain name"},
        OpaqueCase{"for a[1] in a; do y; done", "a for loop's variable must be a plain name"},
        OpaqueCase{"for $v in a; do y; done", "a for loop's variable must be a plain name"},
        OpaqueCase{"for x in a > f; do y; done", "a for loop's words must end"},
        OpaqueCase{"case", "case without a word"}, OpaqueCase{"case x", "case without 'in'"},
        OpaqueCase{"case x in", "unterminated case: missing 'esac'"},
        OpaqueCase{"case x in a) y", "unterminated case: missing 'esac'"},
        OpaqueCase{"case x in a) y;;", "unterminated case: missing 'esac'"},
        OpaqueCase{"case x in a y) z;; esac", "case pattern without its ')'"},
        OpaqueCase{"case x in ) z;; esac", "case item without a pattern"},
        OpaqueCase{"if x; then y; fi z", "unexpected word after if ... fi"},
        OpaqueCase{"while x; do y; done (z)", "unexpected '(' after a loop"},
        OpaqueCase{"[[ -f x", "unterminated [[ ]] test: missing ']]'"},
        OpaqueCase{"[[ a ]] b", "unexpected word after [[ ]]"},
        OpaqueCase{"[[ ( -f x ) && y ]]", "[[ ]] with parentheses"},
        OpaqueCase{"[[ a <<x ]]\nx", "here-document or here-string inside [[ ]]"},
        OpaqueCase{"[[ a || $X ]]", "parameter expansion in the command name"},
        OpaqueCase{"[[ a || bash -c $X ]]", "expansion in code run by bash -c"},
        OpaqueCase{"[[ a > $F ]]", "in a redirection target"},
        // sh reads < > in [[ ]] as redirections, of files named by expansions here.
        OpaqueCase{"[[ $a < $b ]]", "in a redirection target"},
        // Without bash -c, the sh reading runs the command `${#a[@]}`.
        OpaqueCase{"[[ x || ${#a[@]} -gt 0 ]]", "parameter expansion in the command name"}));

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
    testing::Values(OpaqueCase{"bash -c 'echo $(a'", "unterminated $( ) or <( )"},
                    OpaqueCase{"bash -c 'if x; then y'", "unterminated if"},
                    OpaqueCase{"bash -c \"echo $HOME\"", "expansion in code run by bash -c"},
                    OpaqueCase{"bash -c \"$(cat x)\"", "expansion in code run by bash -c"},
                    OpaqueCase{"bash -c $CMD", "expansion in code run by bash -c"},
                    OpaqueCase{"bash -c *", "expansion in code run by bash -c"},
                    OpaqueCase{"sh -c ~", "expansion in code run by sh -c"},
                    OpaqueCase{"bash -c", "bash -c without a command string"},
                    OpaqueCase{"bash -o pipefail -c", "bash -c without a command string"},
                    OpaqueCase{"eval \"$X\"", "expansion in code run by eval"},
                    OpaqueCase{"eval echo *", "expansion in code run by eval"},
                    // eval of one substitution's output is read (code_from_output); anything more
                    // in the code, or a substitution that only looks like one, is not.
                    OpaqueCase{"eval \"$(curl x) y\"", "expansion in code run by eval"},
                    OpaqueCase{"eval \"$(echo '(') git push $(echo ')')\"",
                               "expansion in code run by eval"},
                    OpaqueCase{"eval \"$(a)\"\"$(b)\"", "expansion in code run by eval"},
                    OpaqueCase{"eval $(a) $(b)", "expansion in code run by eval"},
                    OpaqueCase{"trap \"$X\" EXIT", "expansion in code run by trap"},
                    OpaqueCase{"bash -c 'echo \"unterminated'", "unterminated double quote"},
                    OpaqueCase{"sh -c 'sh -c \"sh -c \\\"sh -c \\\\\\\"sh -c x\\\\\\\"\\\"\"'",
                               "nested more than 4 levels"}));

// eval "$(CMD)": the code is CMD's output. CMD is listed; the eval is marked so the engine can
// judge it as it judges `CMD | sh`.
TEST(ShellParseTest, EvalOfOneSubstitutionRunsItsOutput) {
  for (const char* line :
       {"eval \"$(brew shellenv)\"", "eval $(brew shellenv)", "eval \"$(echo ')' | tr -d x)\""}) {
    SCOPED_TRACE(line);
    const ShellParse p = ParseShell(line);
    ASSERT_FALSE(p.opaque) << p.opaque_reason;
    bool inner = false;
    bool marked = false;
    for (const SimpleCommand& c : p.commands) {
      inner = inner || (c.run_by == "$( )" && !c.argv.empty());
      if (c.argv.front() == "eval") marked = c.code_from_output;
    }
    EXPECT_TRUE(inner);
    EXPECT_TRUE(marked);
  }
  // Code written literally is read as before and not marked.
  const ShellParse literal = ParseShell("eval 'git status'");
  ASSERT_FALSE(literal.opaque);
  for (const SimpleCommand& c : literal.commands) EXPECT_FALSE(c.code_from_output);
}

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
            "shell code nested more than 4 levels deep (sh -c, eval, trap, $( ), here-documents) "
            "cannot be checked");
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

TEST(ShellParseViewTest, WordsMadeByTheParserSurviveAMove) {
  // Brace-expanded words, unescaped `...` code, here-document code without its tabs and the
  // "NAME=" of loops and readers are strings of the parse's own.
  const std::string script =
      "echo {a,'b c'}; echo `echo \\`id\\``; for v in x; do read w; done; "
      "sh <<-'EOF'\n\tgit st{a,b}\n\tEOF\n";
  ShellParseView v = ParseShellView(script);
  ASSERT_FALSE(v.opaque) << v.opaque_reason;
  const std::string before = RenderFull(v);
  EXPECT_EQ(before,
            "argv[echo,a,b c] ; argv[echo,{a,b c}] ; argv[id] by[$( )] ; argv[echo,`id`] by[$( )] "
            "; argv[echo,`echo \\`id\\``] ; env[v=] argv[read,w] ; env[v=,w=] argv[sh] in[<<] "
            "code ; env[v=,w=] argv[git,sta,stb] ; env[v=,w=] argv[git,st{a,b}]");
  ShellParseView moved = std::move(v);
  const std::vector<std::string> filler(64, std::string(100, '#'));  // reuses freed memory, if any
  EXPECT_EQ(RenderFull(moved), before);
  EXPECT_EQ(RenderFull(ParseShell(script)), before);
}

TEST(ShellParseTest, NewFieldsOfACommand) {
  ShellParse p = ParseShell("curl -fsSL x | xargs -I{} sh -c 'cat' <<< y");
  ASSERT_FALSE(p.opaque) << p.opaque_reason;
  ASSERT_EQ(p.commands.size(), 4U);
  const SimpleCommand& curl = p.commands[0];
  EXPECT_EQ(curl.pipeline, 1U);
  EXPECT_EQ(curl.stage, 0U);
  EXPECT_EQ(curl.stdin_from, StdinSource::kInherited);
  const SimpleCommand& xargs = p.commands[1];
  EXPECT_EQ(xargs.pipeline, 1U);
  EXPECT_EQ(xargs.stage, 1U);
  EXPECT_EQ(xargs.stdin_from, StdinSource::kHereString);  // its own redirection wins
  const SimpleCommand& sh = p.commands[2];
  EXPECT_EQ(sh.argv, (std::vector<std::string>{"sh", "-c", "cat"}));
  EXPECT_EQ(sh.run_by, "xargs");
  EXPECT_FALSE(sh.more_args);  // -I: the input replaces {}, nothing is appended
  EXPECT_FALSE(sh.stdin_is_code);
  EXPECT_EQ(p.commands[3].argv, std::vector<std::string>{"cat"});
  EXPECT_EQ(p.commands[3].stage, 1U);  // the sh -c string is part of the stage
}

TEST(ShellParseTest, NewConstructsAreLinearAndBounded) {
  // Long but legal inputs of the new constructs finish, and deep or huge ones are refused.
  std::string loops;
  while (loops.size() < kMaxShellScript - 64) loops += "for i in a b; do echo $i; done; ";
  ShellParse p = ParseShell(loops);
  ASSERT_FALSE(p.opaque) << p.opaque_reason;
  std::string docs;
  // One line of 2000 here-documents, then their bodies.
  for (int k = 0; k < 2'000; ++k) docs += "cat <<E" + std::to_string(k) + ";";
  docs += "\n";
  for (int k = 0; k < 2'000; ++k) docs += "x\nE" + std::to_string(k) + "\n";
  p = ParseShell(docs);
  ASSERT_FALSE(p.opaque) << p.opaque_reason;
  EXPECT_EQ(p.commands.size(), 2'000U);
  std::string operators = "cat";
  while (operators.size() < kMaxShellScript - 8) operators += " <<a";
  EXPECT_FALSE(ParseShell(operators).opaque);
  std::string subs = "echo";
  while (subs.size() < kMaxShellScript - 16) subs += " $(a) `b` $((1))";
  p = ParseShell(subs);
  ASSERT_FALSE(p.opaque) << p.opaque_reason;
  std::string open = "echo ";
  while (open.size() < kMaxShellScript - 4) open += "$((";
  EXPECT_TRUE(ParseShell(open).opaque);
  std::string brackets = "echo $[";
  while (brackets.size() < kMaxShellScript - 4) brackets += "[";
  EXPECT_TRUE(ParseShell(brackets).opaque);
  std::string tests;
  while (tests.size() < kMaxShellScript - 32) tests += "[[ a && b ]] && ";
  EXPECT_FALSE(ParseShell(tests + "x").opaque);
  std::string braces = "echo ";
  while (braces.size() < kMaxShellScript - 4) braces += "{a}";
  EXPECT_FALSE(ParseShell(braces).opaque);
  std::string nested_braces = "echo x";
  for (int k = 0; k < 20'000; ++k) nested_braces += "{";
  for (int k = 0; k < 20'000; ++k) nested_braces += "}";
  EXPECT_FALSE(ParseShell(nested_braces).opaque);
  std::string steps = "echo ";
  for (int k = 0; k < 300; ++k) steps += "{1..1}";
  EXPECT_TRUE(ParseShell(steps).opaque);  // too many expansion steps
  std::string deep_compound;
  for (int k = 0; k < 100; ++k) deep_compound += "if a; then ";
  EXPECT_EQ(ParseShell(deep_compound).opaque_reason, "( ) or { } groups nested too deep");
  std::string deep_subs = "echo ";
  for (int k = 0; k < 100; ++k) deep_subs += "$(";
  EXPECT_TRUE(ParseShell(deep_subs).opaque);
}

}  // namespace
}  // namespace cagent::policy
