// Module hooks of the runner: "luma" is the runner's API module; .ts and .mts files are
// transpiled with the typescript package; bare imports are checked against "dependencies".
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

let settings = { api: "", dependencies: null, searchFrom: [], moduleUrl: "" };
let typescript = null;

export async function initialize(data) {
  settings = data;
}

function packageName(specifier) {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

export async function resolve(specifier, context, nextResolve) {
  if (specifier === "luma") {
    return { url: settings.api, shortCircuit: true };
  }
  const bare = !specifier.startsWith(".") && !specifier.startsWith("/") &&
    !specifier.startsWith("file:") && !specifier.startsWith("node:") &&
    !specifier.startsWith("data:");
  const fromUser = context.parentURL && context.parentURL.startsWith("file:") &&
    !context.parentURL.includes("/node_modules/");
  if (bare && fromUser) {
    const { builtinModules } = await import("node:module");
    const name = packageName(specifier);
    const builtin = builtinModules.includes(name);
    if (!builtin && settings.dependencies !== null && !settings.dependencies.includes(name)) {
      throw new Error(`may not import '${name}': it is not in ${settings.dependenciesKey}`);
    }
    if (!builtin && settings.dependencyRoot) {
      // the module's packages come from dependency_root (its node_modules), not from
      // wherever Node.js would look beside the module
      return nextResolve(specifier, { ...context, parentURL: settings.dependencyRoot });
    }
  }
  return nextResolve(specifier, context);
}

function loadTypescript() {
  if (typescript !== null) return typescript;
  for (const folder of settings.searchFrom) {
    try {
      typescript = createRequire(folder + "/noop.js")("typescript");
      return typescript;
    } catch {
      // try the next folder
    }
  }
  throw new Error("TYPESCRIPT_MISSING");
}

export async function load(url, context, nextLoad) {
  if (url.startsWith("file:") && (url.endsWith(".ts") || url.endsWith(".mts"))) {
    const ts = loadTypescript();
    const source = await readFile(fileURLToPath(url), "utf8");
    const out = ts.transpileModule(source, {
      fileName: fileURLToPath(url),
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022,
                         verbatimModuleSyntax: false, isolatedModules: true },
    });
    return { format: "module", source: out.outputText, shortCircuit: true };
  }
  return nextLoad(url, context);
}
