// False blocks: ordinary developer work must pass inside the default sandbox. A sandbox that breaks
// git, a C build, Python's threads/multiprocessing/asyncio/sqlite or Node's child processes and
// local servers gets switched off by its users, which protects nobody.
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace cagent::testing {
namespace {

using ::testing::HasSubstr;

class FalseBlockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!h_.skip_reason().empty()) GTEST_SKIP() << h_.skip_reason();
    ws_ = h_.MakeDir("work");
  }
  RunResult Sh(const std::string& script) {
    RunOptions o;
    o.timeout = std::chrono::seconds(180);
    return h_.Run({"exec", "--workspace", ws_, "--", "/bin/sh", "-c", script}, o);
  }
  void Write(const std::string& name, const std::string& content) {
    std::ofstream(ws_ + "/" + name) << content;
  }
  static bool Have(const char* path) { return ::access(path, X_OK) == 0; }

  Harness& h_ = Harness::Get();
  std::string ws_;
};

TEST_F(FalseBlockTest, Git) {
  if (!Have("/usr/bin/git")) GTEST_SKIP() << "git is not installed on this machine";
  const RunResult r = Sh(
      "set -e; git init -q repo && cd repo && echo hello > a.txt && git add a.txt && "
      "git -c user.name=t -c user.email=t@example.invalid commit -qm first && "
      "echo more >> a.txt && git status --short && git log --oneline | wc -l && git diff --stat");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr(" M a.txt"));
  EXPECT_THAT(r.out, HasSubstr("1\n"));
}

TEST_F(FalseBlockTest, CProjectWithCMakeMakeAndTests) {
  if (!Have("/usr/bin/cmake") || !Have("/usr/bin/cc")) GTEST_SKIP() << "cmake or cc is missing";
  Write("CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.16)\nproject(demo C)\nenable_testing()\n"
        "add_library(sum sum.c)\nadd_executable(sum_test sum_test.c)\n"
        "target_link_libraries(sum_test sum)\nadd_test(NAME sum_test COMMAND sum_test)\n");
  Write("sum.c", "int sum(int a, int b) { return a + b; }\n");
  Write("sum_test.c",
        "#include <stdio.h>\nint sum(int, int);\n"
        "int main(void) { if (sum(2, 3) != 5) return 1; puts(\"sum ok\"); return 0; }\n");
  const RunResult r =
      Sh("set -e; cmake -S . -B build >/dev/null && make -C build -j2 >/dev/null && "
         "cd build && ctest --output-on-failure");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("100% tests passed"));
}

TEST_F(FalseBlockTest, PythonThreadsMultiprocessingAsyncioSqliteAndTcp) {
  if (!Have("/usr/bin/python3")) GTEST_SKIP() << "/usr/bin/python3 is not installed";
  Write("work.py", R"PY(import asyncio, multiprocessing, socket, sqlite3, threading

def square(x):
    return x * x

async def tcp_roundtrip():
    async def handle(reader, writer):
        writer.write(await reader.read(100))
        await writer.drain()
        writer.close()
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"ping")
    await writer.drain()
    data = await reader.read(100)
    writer.close()
    server.close()
    await server.wait_closed()
    return data

results = []
threads = [threading.Thread(target=lambda i=i: results.append(i)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
assert sorted(results) == list(range(8))

with multiprocessing.Pool(2) as pool:
    assert pool.map(square, range(10)) == [x * x for x in range(10)]
lock = multiprocessing.Lock()  # a POSIX semaphore in /dev/shm
with lock:
    pass

db = sqlite3.connect("test.db")
db.execute("create table t (x)")
db.executemany("insert into t values (?)", [(i,) for i in range(100)])
db.commit()
assert db.execute("select sum(x) from t").fetchone()[0] == 4950

assert asyncio.run(tcp_roundtrip()) == b"ping"

s6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s6.bind(("::1", 0))
s6.close()
print("python ok")
)PY");
  const RunResult r = Sh("/usr/bin/python3 work.py");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("python ok"));
}

TEST_F(FalseBlockTest, NodeChildProcessesAndHttpServer) {
  if (!Have("/usr/bin/node")) GTEST_SKIP() << "/usr/bin/node is not installed";
  Write("work.js", R"JS(const { execFileSync, spawn } = require('child_process');
const http = require('http');
const out = execFileSync('/bin/sh', ['-c', 'echo child-ok']).toString();
if (out.trim() !== 'child-ok') throw new Error('child output: ' + out);
const server = http.createServer((req, res) => res.end('hello ' + req.url));
server.listen(0, '127.0.0.1', () => {
  const port = server.address().port;
  http.get({ host: '127.0.0.1', port, path: '/x' }, (res) => {
    let body = '';
    res.on('data', (c) => (body += c));
    res.on('end', () => {
      server.close();
      if (body !== 'hello /x') throw new Error('body: ' + body);
      const p = spawn('/bin/true');
      p.on('exit', (code) => { console.log('node ok', code); });
    });
  });
});
)JS");
  const RunResult r = Sh("/usr/bin/node work.js");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("node ok 0"));
}

}  // namespace
}  // namespace cagent::testing
