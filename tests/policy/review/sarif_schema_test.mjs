// `cagent policy audit --format sarif` against the SARIF 2.1.0 JSON schema (the OASIS schema as
// published in the npm package @microsoft/jest-sarif, checked with ajv; both pinned in
// tests/mcp_clients/package-lock.json and installed by the README's test command). Every built-in
// profile is audited, and a repository profile with findings of every kind, from the repository's
// root, so that built-in locations, SRCROOT-relative locations and absolute file locations all
// appear. Exits 77 (skipped, saying why) when node's packages are missing, unless
// CAGENT_REQUIRE_MCP_CLIENTS=1 (CI), where that is a failure.
//
// usage: node sarif_schema_test.mjs CAGENT_BINARY
import { spawnSync } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const modules = join(here, "..", "..", "mcp_clients", "package.json");
const cagent = process.argv[2] ? resolve(process.argv[2]) : "";

function skipOrFail(why) {
  if (process.env.CAGENT_REQUIRE_MCP_CLIENTS === "1") {
    console.error(`FAIL: ${why} (CAGENT_REQUIRE_MCP_CLIENTS=1)`);
    process.exit(1);
  }
  console.log(`SKIP: ${why}; run (cd tests/mcp_clients && npm ci) first`);
  process.exit(77);
}

let Ajv;
let schema;
let draft04;
try {
  const require = createRequire(modules);
  Ajv = require("ajv");
  // The SARIF schema is written in JSON Schema draft-04.
  draft04 = require("ajv/lib/refs/json-schema-draft-04.json");
  schema = JSON.parse(
    readFileSync(require.resolve("@microsoft/jest-sarif/lib/schemas/sarif-2.1.0-rtm.5.json"), "utf8"),
  );
} catch (e) {
  skipOrFail(`the schema validator is not installed (${e.code || e.message})`);
}
if (!cagent) {
  console.error("usage: node sarif_schema_test.mjs CAGENT_BINARY");
  process.exit(2);
}

const ajv = new Ajv({ allErrors: true, schemaId: "auto" });
ajv.addMetaSchema(draft04);
const validate = ajv.compile(schema);

const repo = mkdtempSync(join(tmpdir(), "cagent-sarif-"));
let failures = 0;
try {
  mkdirSync(join(repo, ".cagent"));
  // Findings of many rules, located in this file: network, hosts, environment, approval, limits.
  writeFileSync(
    join(repo, ".cagent", "project.cagent"),
    [
      'description "SARIF schema test: many findings"',
      "extends backend",
      "approval auto",
      "environment {",
      "  pass *",
      "}",
      "hosts {",
      "  allow *",
      "  allow 169.254.169.254",
      "}",
      "limits {",
      "  memory unlimited",
      "}",
      "",
    ].join("\n"),
  );
  // A hostile file name: percent-encoded in the URI, still valid.
  writeFileSync(join(repo, ".cagent", "a b%#?.cagent"), "extends base\nnetwork loopback\n");
  const outside = join(repo, "..", `${repo.split("/").pop()}-outside.cagent`);
  writeFileSync(outside, "extends base\nnetwork loopback\n");

  const targets = [
    "base",
    "backend",
    "frontend",
    "docs",
    "readonly",
    "mcp-server",
    "agent-cli",
    "backend-registries",
    "frontend-registries",
    "./.cagent/project.cagent",
    "./.cagent/a b%#?.cagent",
    outside,
  ];
  const seen = { builtin: false, srcroot: false, file: false };
  for (const target of targets) {
    const r = spawnSync(cagent, ["policy", "audit", target, "--format", "sarif", "--fail-on", "never"], {
      cwd: repo,
      encoding: "utf8",
    });
    if (r.status !== 0) {
      console.error(`FAIL ${target}: cagent exited ${r.status}: ${r.error ?? r.stderr}`);
      failures++;
      continue;
    }
    let log;
    try {
      log = JSON.parse(r.stdout);
    } catch (e) {
      console.error(`FAIL ${target}: not JSON: ${e.message}`);
      failures++;
      continue;
    }
    // Twin: the validator refuses the same log with one field broken (a level SARIF has not).
    const broken = JSON.parse(r.stdout);
    broken.runs[0].tool.driver.rules[0].defaultConfiguration.level = "severe";
    if (validate(broken)) {
      console.error(`FAIL ${target}: the validator accepted a log with level "severe"`);
      failures++;
    }
    if (!validate(log)) {
      console.error(`FAIL ${target}: not valid SARIF 2.1.0:`);
      for (const err of validate.errors.slice(0, 20)) {
        console.error(`  ${err.dataPath || err.instancePath} ${err.message} ${JSON.stringify(err.params)}`);
      }
      failures++;
      continue;
    }
    for (const result of log.runs[0].results) {
      for (const loc of result.locations) {
        const a = loc.physicalLocation.artifactLocation;
        if (a.uri.startsWith("cagent-builtin:")) seen.builtin = true;
        else if (a.uriBaseId === "SRCROOT") seen.srcroot = true;
        else if (a.uri.startsWith("file:///")) seen.file = true;
      }
    }
    const base = log.runs[0].originalUriBaseIds?.SRCROOT?.uri;
    if (base !== `file://${repo}/`) {
      console.error(`FAIL ${target}: SRCROOT is ${base}, not file://${repo}/`);
      failures++;
    }
    console.log(`ok ${target}: ${log.runs[0].results.length} results, valid SARIF 2.1.0`);
  }
  for (const [kind, found] of Object.entries(seen)) {
    if (!found) {
      console.error(`FAIL: no location of kind ${kind} was produced (the test lost its coverage)`);
      failures++;
    }
  }
  rmSync(outside, { force: true });
} finally {
  rmSync(repo, { recursive: true, force: true });
}
process.exit(failures === 0 ? 0 : 1);
