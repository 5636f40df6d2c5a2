// Module hooks of the runner: "luma" is the runner's API module; .ts and .mts files are
// transpiled with the typescript package; bare imports are checked against "dependencies".
import { readFile } from "node:fs/promises";
import { builtinModules, createRequire } from "node:module";
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

// Whether a bare import from the module's own code names a package, not a module built into
// Node.js; a package that "dependencies" (when there is such a list) leaves out is refused.
// The runner applies it to require() too.
export function isPackage(specifier, dependencies, dependenciesKey) {
  const name = packageName(specifier);
  if (builtinModules.includes(name)) return false;
  if (dependencies !== null && !dependencies.includes(name)) {
    throw new Error(`may not import '${name}': it is not in ${dependenciesKey}`);
  }
  return true;
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
  if (bare && fromUser && isPackage(specifier, settings.dependencies, settings.dependenciesKey) &&
      settings.dependencyRoot) {
    // the module's packages come from dependency_root (its node_modules), not from wherever
    // Node.js would look beside the module
    return nextResolve(specifier, { ...context, parentURL: settings.dependencyRoot });
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
