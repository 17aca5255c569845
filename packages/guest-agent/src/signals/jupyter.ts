/**
 * Jupyter: every running server on the machine (from runtime files, plus configured URLs),
 * each queried for its kernels, terminals and status. A busy kernel is a veto; the youngest
 * kernel/terminal last_activity is activity. What decides is the collector: this reports.
 */
import type { Agent } from "node:http";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { JupyterServerSchema, JupyterSignalSchema } from "@ws/protocol";
import type { Users } from "../users.js";
import { discoverServers, type DiscoveredServer } from "./jupyter-discovery.js";
import { createHomeScan, type HomeScan } from "./home-scan.js";
import { deadline, HttpStatusError, JupyterAgents, jupyterGet, jupyterGetOk } from "./jupyter-http.js";
import {
  endpointFromRuntime,
  parseApiInfo,
  parseConfiguredUrl,
  parseKernels,
  parseStatus,
  parseTerminals,
  type JupyterEndpoint,
} from "./jupyter-parse.js";
import { absent, errorMessage, failed, ok, type Signal, type SignalContext, type SignalOutcome } from "./types.js";
import type { WatchedServices } from "./watched-services.js";

export {
  endpointFromRuntime,
  parseApiInfo,
  parseConfiguredUrl,
  parseJupyterTime,
  parseKernels,
  parseRuntimeFile,
  parseStatus,
  parseTerminals,
} from "./jupyter-parse.js";

export type JupyterSignalValue = MessageInitShape<typeof JupyterSignalSchema>;
type ServerInit = MessageInitShape<typeof JupyterServerSchema>;

export interface JupyterSignalOptions {
  /** Servers no runtime file tells about (another user's JupyterHub single-user server, a container). */
  urls: string[];
  /** The most one server may cost per sample; a hung one is reported unreachable after it. */
  timeoutMs: number;
  /** Shared with the code-server signal (createSignals), so homes are listed once per sample. */
  homes?: HomeScan;
  /** Where the servers found are published for the remote-sessions signal (forwards to them). */
  services?: WatchedServices;
}

/** One server to query and what is already known about it. */
interface ServerTarget {
  endpoint: JupyterEndpoint;
  runtimeFile: string;
  pid: number;
  uid: number;
  user: string;
  version: string;
}

export function createJupyterSignal(options: JupyterSignalOptions): Signal<JupyterSignalValue> {
  const configured: JupyterEndpoint[] = [];
  const configErrors: string[] = [];
  for (const url of options.urls) {
    try {
      configured.push(parseConfiguredUrl(url));
    } catch (error) {
      configErrors.push(errorMessage(error));
    }
  }
  const homes = options.homes ?? createHomeScan();
  const agents = new JupyterAgents();
  return {
    name: "jupyter",
    async collect(ctx: SignalContext): Promise<SignalOutcome<JupyterSignalValue>> {
      let discovered: Awaited<ReturnType<typeof discoverServers>>;
      try {
        discovered = await discoverServers(ctx.roots, ctx.users, ctx.signal, await homes.sample(ctx));
      } catch (error) {
        return failed(`discovery: ${errorMessage(error)}`);
      }
      const problems = [...configErrors];
      const targets: ServerTarget[] = [];
      for (const server of discovered.servers) {
        try {
          targets.push(targetFromRuntime(server, ctx.users));
        } catch (error) {
          problems.push(`${server.runtimeFile}: ${errorMessage(error)}`);
        }
      }
      const known = new Set(targets.map((target) => target.endpoint.url));
      for (const endpoint of configured) {
        if (known.has(endpoint.url)) continue;
        known.add(endpoint.url);
        targets.push({ endpoint, runtimeFile: "", pid: 0, uid: 0, user: "", version: "" });
      }
      problems.push(...discovered.problems);
      options.services?.publishJupyter(targets.map((target) => ({ pid: target.pid, url: target.endpoint.url })));

      const notes = [...problems];
      if (discovered.staleFiles.length > 0) {
        notes.push(
          `skipped ${discovered.staleFiles.length} stale runtime file(s): ${discovered.staleFiles.join(", ")}`,
        );
      }
      const message = notes.length > 0 ? notes.join("; ") : undefined;

      if (targets.length === 0) {
        agents.sweep();
        if (problems.length > 0) return failed(`no Jupyter server could be discovered: ${problems.join("; ")}`);
        return absent(message ?? "no Jupyter server running");
      }
      const servers = await Promise.all(
        targets.map((target) => queryServer(target, options.timeoutMs, ctx, agents.for(target.endpoint))),
      );
      // Servers no longer found lose their kept-alive connections.
      agents.sweep();
      servers.sort((a, b) => (a.url ?? "").localeCompare(b.url ?? ""));
      return ok({ servers }, message);
    },
  };
}

function targetFromRuntime(server: DiscoveredServer, users: Users): ServerTarget {
  return {
    endpoint: endpointFromRuntime(server.info),
    runtimeFile: server.runtimeFile,
    pid: server.pid,
    uid: server.uid,
    user: users.byUid(server.uid)?.name ?? "",
    version: server.info.version ?? "",
  };
}

/**
 * All requests to one server run at once under one deadline, so a hung server costs at most
 * timeoutMs. The server is reachable when its kernels could be read: they carry the veto.
 */
async function queryServer(
  target: ServerTarget,
  timeoutMs: number,
  ctx: SignalContext,
  agent: Agent | undefined,
): Promise<ServerInit> {
  const { endpoint } = target;
  const server: ServerInit = {
    url: endpoint.url,
    runtimeFile: target.runtimeFile,
    pid: target.pid,
    uid: target.uid,
    user: target.user,
    reachable: false,
    error: "",
    version: target.version,
    kernels: [],
    terminals: [],
  };
  const limit = deadline(ctx.signal, timeoutMs);
  try {
    const [kernels, terminals, status, api] = await Promise.allSettled([
      jupyterGetOk(endpoint, `api/kernels${UNTRACKED}`, limit.signal, agent),
      jupyterGetOk(endpoint, `api/terminals${UNTRACKED}`, limit.signal, agent),
      jupyterGetOk(endpoint, "api/status", limit.signal, agent),
      target.version === "" ? jupyterGet(endpoint, `api${UNTRACKED}`, limit.signal, agent) : Promise.resolve(undefined),
    ]);
    // Times are turned into ages once every answer is in: the answers are all from that moment or before.
    const nowMs = ctx.clock.nowMs();
    const errors: string[] = [];

    if (kernels.status === "rejected") {
      server.error = describeFailure("api/kernels", kernels.reason);
      return server;
    }
    try {
      server.kernels = parseKernels(kernels.value, nowMs);
      server.reachable = true;
    } catch (error) {
      server.error = errorMessage(error);
      return server;
    }

    if (terminals.status === "fulfilled") {
      try {
        server.terminals = parseTerminals(terminals.value, nowMs);
      } catch (error) {
        errors.push(errorMessage(error));
      }
    } else if (!(terminals.reason instanceof HttpStatusError && terminals.reason.status === 404)) {
      // 404 means terminals are turned off (or terminado is missing): there are none to see.
      errors.push(describeFailure("api/terminals", terminals.reason));
    }

    if (status.status === "fulfilled") {
      try {
        const parsed = parseStatus(status.value, nowMs);
        if (parsed.lastActivityAgeSeconds !== undefined) server.lastActivityAgeSeconds = parsed.lastActivityAgeSeconds;
      } catch (error) {
        errors.push(errorMessage(error));
      }
    } else {
      errors.push(describeFailure("api/status", status.reason));
    }

    if (api.status === "fulfilled" && api.value?.status === 200) {
      try {
        server.version = parseApiInfo(api.value.body).version;
      } catch {
        // The version is a courtesy; its absence says nothing about activity.
      }
    }
    server.error = errors.join("; ");
    return server;
  } finally {
    limit.dispose();
  }
}

/**
 * Jupyter counts every authenticated API call as user activity (/api/status last_activity,
 * which JupyterHub's culler also reads) unless it carries this flag, which is what JupyterHub's
 * own polling sends. Without it the agent's polling would keep every server "active".
 */
const UNTRACKED = "?no_track_activity=1";

function describeFailure(apiPath: string, reason: unknown): string {
  const message = errorMessage(reason).replace(UNTRACKED, "");
  const path = apiPath.replace(UNTRACKED, "");
  return message.startsWith(path) ? message : `${path}: ${message}`;
}
