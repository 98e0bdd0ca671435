// `cagent batch k8s` against the real Kubernetes schemas: the manifest it writes (a v1 List of a
// ConfigMap and an Indexed Job) is checked item by item with the validators of the npm package
// kubernetes-models (generated from Kubernetes' OpenAPI definitions: types, enums, required
// fields), and every field name is looked up in the same package's type definitions, as kubectl's
// strict field validation would (the OpenAPI schema itself lets unknown fields through).
// Twins: the same manifest with a broken field (completionMode "Bogus", no containers, a
// misspelt securityContext field, an unknown seccomp profile type) is rejected by the same
// checks, so they are not vacuous.
//
// kubernetes-models is pinned with the MCP clients in tests/mcp_clients/package-lock.json and
// installed by the README's test command. Exits 77 (skipped, saying why) when it is missing,
// unless CAGENT_REQUIRE_MCP_CLIENTS=1 (CI), where that is a failure.
//
// usage: node k8s_schema_test.mjs CAGENT_BINARY
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const nodeModules = join(here, "..", "mcp_clients", "node_modules");
const models = join(nodeModules, "kubernetes-models");
const cagent = process.argv[2] ? resolve(process.argv[2]) : "";

function skipOrFail(why) {
  if (process.env.CAGENT_REQUIRE_MCP_CLIENTS === "1") {
    console.error(`FAIL: ${why} (CAGENT_REQUIRE_MCP_CLIENTS=1)`);
    process.exit(1);
  }
  console.log(`SKIP: ${why}; run (cd tests/mcp_clients && npm ci) first`);
  process.exit(77);
}

let Job;
let ConfigMap;
try {
  ({ Job } = await import(pathToFileURL(join(models, "batch", "v1", "Job.js")).href));
  ({ ConfigMap } = await import(pathToFileURL(join(models, "v1", "ConfigMap.js")).href));
} catch (e) {
  skipOrFail(`kubernetes-models is not installed (${e.code || e.message})`);
}
if (!cagent) {
  console.error("usage: node k8s_schema_test.mjs CAGENT_BINARY");
  process.exit(2);
}

// ---- field names, from the package's TypeScript definitions ----
// Each type's file declares `export interface IName { "field"?: TYPE; ... }` and imports the
// types its fields use; a field whose TYPE is one of those (or an Array of one) is checked
// recursively, a map ({ [key: string]: ... }) or a scalar is a leaf.
const interfaces = new Map();
function readInterface(file) {
  if (interfaces.has(file)) return interfaces.get(file);
  const text = readFileSync(file, "utf8");
  const imports = new Map();
  for (const m of text.matchAll(/^import \{ (\w+) \} from "([^"]+)";$/gm)) {
    let target = m[2];
    if (target.startsWith(".")) {
      target = join(dirname(file), target.replace(/\.js$/, ".d.ts"));
    } else if (target.startsWith("@kubernetes-models/")) {
      const nested = join(models, "node_modules", target + ".d.ts");
      target = existsSync(nested) ? nested : join(nodeModules, target + ".d.ts");
    } else {
      continue;
    }
    imports.set(m[1], target);
  }
  const body = text.match(/^export interface I\w+[^{]*\{\n([\s\S]*?)^\}/m);
  if (!body) throw new Error(`no interface in ${file}`);
  const fields = new Map();
  for (const m of body[1].matchAll(/^ {4}"([^"]+)"\??: (.*)$/gm)) {
    const type = m[2].match(/^(?:Array<)?(I\w+)>?;$/);
    fields.set(m[1], type && imports.has(type[1]) ? imports.get(type[1]) : null);
  }
  // TypeMeta (apiVersion, kind) comes from `extends TypeMeta`.
  if (/extends TypeMeta/.test(text)) {
    fields.set("apiVersion", null);
    fields.set("kind", null);
  }
  const result = { fields };
  interfaces.set(file, result);
  return result;
}
function unknownFields(value, file, path, out) {
  if (value === null || typeof value !== "object") return out;
  if (Array.isArray(value)) {
    value.forEach((v, i) => unknownFields(v, file, `${path}[${i}]`, out));
    return out;
  }
  const { fields } = readInterface(file);
  for (const [key, v] of Object.entries(value)) {
    if (!fields.has(key)) {
      out.push(`${path}.${key} is not a field of ${file.replace(nodeModules + "/", "")}`);
    } else if (fields.get(key)) {
      unknownFields(v, fields.get(key), `${path}.${key}`, out);
    }
  }
  return out;
}

// Every problem with one item ([] when it is valid).
function problems(item) {
  const kinds = {
    ConfigMap: [ConfigMap, join(models, "v1", "ConfigMap.d.ts")],
    Job: [Job, join(models, "batch", "v1", "Job.d.ts")],
  };
  const entry = kinds[item.kind];
  if (!entry) return [`unexpected kind ${item.kind}`];
  const out = [];
  try {
    new entry[0](item).validate();
  } catch (e) {
    out.push(`schema: ${e.message}`);
  }
  unknownFields(item, entry[1], item.kind, out);
  return out;
}

function listProblems(manifest) {
  if (manifest.apiVersion !== "v1" || manifest.kind !== "List" || !Array.isArray(manifest.items)) {
    return ["not a v1 List with items"];
  }
  return manifest.items.flatMap((item) => problems(item));
}

// ---- a manifest from cagent ----
const root = mkdtempSync(join(tmpdir(), "cagent-k8s-schema-"));
let failures = 0;
function check(name, ok, detail) {
  console.log(`${ok ? "ok" : "FAIL"}: ${name}${ok ? "" : `: ${detail}`}`);
  if (!ok) failures++;
}
try {
  const data = join(root, "data");
  mkdirSync(join(data, "repos", "calc"), { recursive: true });
  writeFileSync(join(data, "task.md"), "Fix add.\n");
  writeFileSync(join(data, "session.jsonl"), "{}\n");
  const tasks = join(data, "tasks.jsonl");
  writeFileSync(
    tasks,
    [
      { id: "a", repo: "repos/calc", task_file: "task.md", profile: "fix-add", model: "replay:session.jsonl" },
      { id: "b", repo: "https://example.invalid/calc.git", task: "Fix \"add\".\n", profile: "backend", budgets: { max_turns: 3 } },
    ]
      .map((t) => JSON.stringify(t))
      .join("\n") + "\n",
  );
  const out = join(root, "job.json");
  const run = spawnSync(
    cagent,
    ["batch", "k8s", tasks, "--image", "registry.example/cagent:1.0", "--results-pvc", "batch-results",
     "--volume", `batch-data:${data}`, "--secret", "model-keys", "--namespace", "agents", "--parallelism", "2", "-o", out],
    { encoding: "utf8" },
  );
  check("cagent batch k8s exits 0", run.status === 0, `${run.status} ${run.stderr}`);
  const manifest = JSON.parse(readFileSync(out, "utf8"));
  const found = listProblems(manifest);
  check("the manifest validates against the Kubernetes schemas", found.length === 0, found.join("; "));
  check("two items, a ConfigMap and a Job",
        manifest.items.map((i) => i.kind).join(",") === "ConfigMap,Job", JSON.stringify(manifest.items.map((i) => i.kind)));

  // The twins: each a copy of the manifest with one field broken.
  const broken = [
    ["completionMode Bogus", (m) => { m.items[1].spec.completionMode = "Bogus"; }],
    ["no containers", (m) => { delete m.items[1].spec.template.spec.containers; }],
    ["completions as a string", (m) => { m.items[1].spec.completions = "2"; }],
    ["seccomp profile type Unconfinedd", (m) => {
      m.items[1].spec.template.spec.securityContext.seccompProfile.type = "Unconfinedd";
    }],
    ["procMount Unmask", (m) => {
      m.items[1].spec.template.spec.containers[0].securityContext.procMount = "Unmask";
    }],
    ["a misspelt hostUsers", (m) => {
      const spec = m.items[1].spec.template.spec;
      spec.hostUser = spec.hostUsers;
      delete spec.hostUsers;
    }],
    ["a misspelt container securityContext field", (m) => {
      m.items[1].spec.template.spec.containers[0].securityContext.allowPrivilegeEscalations = false;
    }],
    ["a ConfigMap value that is not a string", (m) => { m.items[0].data["tasks.jsonl"] = 1; }],
  ];
  for (const [name, breakIt] of broken) {
    const copy = structuredClone(manifest);
    breakIt(copy);
    const p = listProblems(copy);
    check(`twin: ${name} is rejected`, p.length > 0, "the validator accepted it");
  }
  // And the refusal of a task the pod could not see: no --volume for its local repository.
  const refused = spawnSync(
    cagent,
    ["batch", "k8s", tasks, "--image", "registry.example/cagent:1.0", "--results-pvc", "batch-results"],
    { encoding: "utf8" },
  );
  check("a local repository without a --volume is refused (exit 2, line named)",
        refused.status === 2 && refused.stderr.includes("tasks.jsonl:1: repo"), `${refused.status} ${refused.stderr}`);
} finally {
  rmSync(root, { recursive: true, force: true });
}
if (failures > 0) {
  console.log(`${failures} check(s) failed`);
  process.exit(1);
}
console.log("PASS");
