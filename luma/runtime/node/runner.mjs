// The runner of a JavaScript or TypeScript tool module: Luma's JSON-lines protocol over
// stdin and stdout (one line per message), the module's console output on stderr.
import Module, { register } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { dirname } from "node:path";
import { createInterface } from "node:readline";
import { writeSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { isPackage } from "./hooks.mjs";

const EXPORTS = ["lumaTools", "tools", "default"];

function send(message) {
  writeSync(1, JSON.stringify(message) + "\n");
}

// the module's console.log must not mix into the protocol: it goes to stderr
console.log = console.error;
console.info = console.error;
process.stdout.write = process.stderr.write.bind(process.stderr);

function toolsOf(namespace) {
  for (const key of EXPORTS) {
    const value = namespace[key];
    if (value !== undefined && value !== null && typeof value === "object") {
      return [key, value];
    }
  }
  return ["the module itself", namespace];
}

function plain(value, path, seen) {
  // a JSON value, or the place where it is not one
  if (value === null || typeof value === "string" || typeof value === "boolean") return null;
  if (typeof value === "number") {
    return Number.isFinite(value) ? null : [path, `${value} is not a JSON number`];
  }
  if (Array.isArray(value) || (typeof value === "object" &&
      Object.getPrototypeOf(value) === Object.prototype) ||
      (typeof value === "object" && Object.getPrototypeOf(value) === null)) {
    if (seen.has(value)) return [path, "the value contains itself"];
    seen.add(value);
    const entries = Array.isArray(value) ? value.map((v, i) => [`${path}[${i}]`, v])
      : Object.entries(value).map(([k, v]) => [path ? `${path}.${k}` : k, v]);
    for (const [where, item] of entries) {
      const problem = plain(item, where, seen);
      if (problem !== null) return problem;
    }
    seen.delete(value);
    return null;
  }
  const kind = value === undefined ? "undefined" : typeof value === "object"
    ? `a ${value.constructor?.name ?? "object"}` : `a ${typeof value}`;
  return [path, `${kind} is not a JSON value`];
}

// require() in a CommonJS module does not pass the import hooks (hooks.mjs): "luma" and the
// "dependencies" list are applied here for it, with the same words.
function hookRequire(api, start, rootFile, dependenciesKey) {
  const resolve = Module._resolveFilename;
  let root = null;
  if (rootFile !== null) {
    root = new Module(rootFile);
    root.filename = rootFile;
    root.paths = Module._nodeModulePaths(start.dependency_root);
  }
  Module._resolveFilename = function (request, parent, ...rest) {
    if (request === "luma") return api;
    const bare = !request.startsWith(".") && !request.startsWith("/") &&
      !request.startsWith("node:");
    const fromUser = parent?.filename && !parent.filename.includes("/node_modules/");
    if (bare && fromUser && isPackage(request, start.dependencies, dependenciesKey) &&
        root !== null) {  // the packages come from dependency_root
      return resolve.call(this, request, root, ...rest);
    }
    return resolve.call(this, request, parent, ...rest);
  };
}

// The CPU time limit of calls with a deadline (cpu_watch.cjs), started with the first one.
let watch = null;

function watchCpu(id, limitMs) {
  if (watch === null) {
    watch = new Worker(new URL("./cpu_watch.cjs", import.meta.url));
    watch.unref();
  }
  const usage = process.cpuUsage();
  watch.postMessage({ start: id, from: usage.user + usage.system, limit: limitMs });
}

async function main() {
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  const iterator = lines[Symbol.asyncIterator]();
  const start = JSON.parse((await iterator.next()).value);
  const here = dirname(fileURLToPath(import.meta.url));
  const dependenciesKey = `${start.key}.dependencies`;
  const rootFile = start.dependency_root ? start.dependency_root + "/luma-dependency-root.js"
    : null;
  hookRequire(here + "/luma_tools_api.cjs", start, rootFile, dependenciesKey);
  register("./hooks.mjs", import.meta.url, {
    data: {
      api: pathToFileURL(here + "/luma_tools_api.mjs").href,
      dependencies: start.dependencies, dependenciesKey,
      dependencyRoot: rootFile === null ? "" : pathToFileURL(rootFile).href,
      searchFrom: [dirname(start.file), start.dependency_root, start.project].filter(Boolean),
    },
  });
  let handlers;
  try {
    const namespace = await import(pathToFileURL(start.file).href);
    const [from, table] = toolsOf(namespace);
    const bridges = namespace.datasources ?? table.datasources;
    if (bridges !== undefined && bridges !== null && typeof bridges === "object") {
      const names = Object.keys(bridges).sort().join(", ");
      send({ load_error: { message: `Tool module '${start.written}' exports datasource ` +
        `bridges (${names}), which a JavaScript or TypeScript module does not provide: use a ` +
        `built-in bridge (datasources in luma.config.json), or a bridge in a Python tool ` +
        `module without sandbox 'process'.`, line: null } });
      process.exit(0);
    }
    handlers = {};
    for (const [name, value] of Object.entries(table)) {
      if (from === "the module itself" && (name === "datasources" || name === "default")) continue;
      if (typeof value !== "function") {
        throw new Error(`export '${name}' of ${from} is a ${typeof value}, not a function`);
      }
      handlers[name] = value;
    }
  } catch (error) {
    const text = String(error?.message ?? error);
    const message = text === "TYPESCRIPT_MISSING"
      ? `Tool module '${start.written}' is TypeScript, and the 'typescript' package was not ` +
        `found (looked beside the module, in dependency_root and in the program's folder); ` +
        `install it there (npm install typescript).`
      : `Tool module '${start.written}' could not be loaded: ${error?.name ?? "Error"}: ${text}`;
    send({ load_error: { message, line: null } });
    process.exit(0);
  }
  const warning = process.argv[2] ?? "";
  send({ ready: Object.keys(handlers).sort(), warnings: warning ? [warning] : [] });
  const controllers = new Map();
  for await (const line of { [Symbol.asyncIterator]: () => iterator }) {
    const message = JSON.parse(line);
    if ("cancel" in message) {
      controllers.get(message.cancel)?.abort(message.reason ?? "cancelled");
      continue;
    }
    const controller = new AbortController();
    controllers.set(message.id, controller);
    let expired = false;
    let timer = null;
    if (message.deadline !== undefined) {
      // the call ends at its deadline: its signal fires, and it is answered "timeout"
      timer = setTimeout(() => {
        expired = true;
        controller.abort("timeout");
      }, message.deadline);
      watchCpu(message.id, message.deadline);
    }
    run(handlers[message.tool], message, controller.signal).then((answer) => {
      controllers.delete(message.id);
      if (timer !== null) {
        clearTimeout(timer);
        watch.postMessage({ stop: message.id });
      }
      send(expired ? { id: message.id, timeout: true } : { id: message.id, ...answer });
    });
  }
  process.exit(0);
}

async function run(handler, message, signal) {
  try {
    const raw = await handler(message.input, signal, message.needs ?? {});
    const problem = plain(raw, "", new Set());
    return problem === null ? { ok: raw } : { invalid: problem };
  } catch (error) {
    if (error && (error.isLumaToolError || error.name === "LumaToolError")) {
      return { tool_error: { code: error.code, message: error.message,
                             retryable: Boolean(error.retryable), details: error.details ?? null,
                             extra: error.extra ?? {} } };
    }
    const text = error instanceof Error ? error.message : String(error);
    return { failure: text || (error?.name ?? "Error"), exception: error?.name ?? "Error" };
  }
}

main();
