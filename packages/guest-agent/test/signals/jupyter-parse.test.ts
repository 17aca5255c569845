import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  endpointFromRuntime,
  parseApiInfo,
  parseConfiguredUrl,
  parseJupyterTime,
  parseKernels,
  parseRuntimeFile,
  parseStatus,
  parseTerminals,
} from "../../src/signals/jupyter.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "jupyter");
const fixture = (name: string) => readFileSync(path.join(fixtures, name), "utf8");

/** The captures were made around 2026-11-29T14:28:05Z; "now" is a minute after the busy snapshot. */
const NOW = Date.UTC(2026, 10, 29, 14, 29, 5, 784);

describe("parseRuntimeFile", () => {
  it("reads a jupyter_server runtime file", () => {
    const info = parseRuntimeFile(fixture("jpserver-plain.json"));
    expect(info).toEqual({
      url: "http://127.0.0.1:34999/",
      hostname: "127.0.0.1",
      port: 34999,
      secure: false,
      baseUrl: "/",
      sock: "",
      token: "34801aa4588ab62b79b42a262a1e6872",
      pid: 9555,
      version: "1.23.3",
    });
    expect(endpointFromRuntime(info)).toMatchObject({
      url: "http://127.0.0.1:34999/",
      host: "127.0.0.1",
      port: 34999,
      basePath: "/",
      acceptSelfSigned: true,
    });
  });

  it("keeps base_url and HTTPS of a JupyterHub-style server", () => {
    const endpoint = endpointFromRuntime(parseRuntimeFile(fixture("jpserver-https-base-url.json")));
    expect(endpoint).toMatchObject({
      url: "https://127.0.0.1:44423/user/alice/",
      protocol: "https:",
      basePath: "/user/alice/",
      token: "ee2a35e00710192fea11a9d98138bf73",
      acceptSelfSigned: true,
    });
  });

  it("reaches a server bound to every address on loopback, not on the hostname in its url", () => {
    const info = parseRuntimeFile(fixture("jpserver-wildcard-ip.json"));
    expect(info.url).toBe("http://vm:18889/");
    expect(endpointFromRuntime(info)).toMatchObject({ host: "127.0.0.1", port: 18889, url: "http://127.0.0.1:18889/" });
  });

  it("uses the unix socket of a server started with --sock", () => {
    const endpoint = endpointFromRuntime(parseRuntimeFile(fixture("jpserver-unix-socket.json")));
    expect(endpoint).toMatchObject({ socketPath: "/tmp/jcap/j.sock", url: "http+unix://%2Ftmp%2Fjcap%2Fj.sock/" });
  });

  it("reads the classic notebook's nbserver file", () => {
    const info = parseRuntimeFile(fixture("nbserver-legacy.json"));
    expect(info).toMatchObject({ pid: 4242, port: 8888, hostname: "localhost", baseUrl: "/" });
    expect(info.version).toBeUndefined();
    expect(endpointFromRuntime(info).url).toBe("http://localhost:8888/");
  });

  it("rejects truncated and foreign files with a clear error", () => {
    expect(() => parseRuntimeFile(fixture("jpserver-truncated.json"))).toThrow(/runtime file: not JSON/);
    expect(() => parseRuntimeFile(fixture("jpserver-not-an-object.json"))).toThrow(
      /expected a JSON object, got a list/,
    );
    expect(() => parseRuntimeFile(fixture("jpserver-port-not-a-number.json"))).toThrow(/no port, sock or url/);
    expect(() => parseRuntimeFile("")).toThrow(/not JSON/);
  });
});

describe("parseKernels", () => {
  it("reads no kernels", () => {
    expect(parseKernels(fixture("api-kernels-empty.json"), NOW)).toEqual([]);
  });

  it("reads a busy kernel with its connection and last activity as an age", () => {
    expect(parseKernels(fixture("api-kernels-busy.json"), NOW)).toEqual([
      {
        id: "21d5840e-b8d3-4aa8-b405-81e784417f4c",
        name: "python3",
        executionState: "busy",
        lastActivityAgeSeconds: 60,
        connections: 1,
      },
    ]);
  });

  it("reports a never-connected kernel as starting, which is not busy", () => {
    const kernels = parseKernels(fixture("api-kernels-idle-and-starting.json"), NOW);
    expect(kernels.map((k) => [k.executionState, k.connections])).toEqual([
      ["idle", 0],
      ["starting", 0],
    ]);
    expect(kernels[0]!.lastActivityAgeSeconds).toBeCloseTo(59.703, 3);
    expect(parseKernels(fixture("api-kernels-starting.json"), NOW)[0]!.executionState).toBe("starting");
  });

  it("survives odd fields: bad dates give no age, bad counts give 0, offsets are honoured", () => {
    expect(parseKernels(fixture("api-kernels-odd-fields.json"), NOW)).toEqual([
      { id: "a", name: "python3", executionState: "idle", connections: 0 },
      { id: "b", name: "", executionState: "busy", connections: 0 },
      { id: "c", name: "ir", executionState: "idle", connections: 0, lastActivityAgeSeconds: 60.784 },
    ]);
  });

  it("never reports a negative age for a time in the future", () => {
    expect(parseKernels(fixture("api-kernels-busy.json"), Date.UTC(2020, 0, 1))[0]!.lastActivityAgeSeconds).toBe(0);
  });

  it("rejects what is not a kernel list with a clear error", () => {
    expect(() => parseKernels(fixture("api-kernels-truncated.json"), NOW)).toThrow(/api\/kernels: not JSON/);
    expect(() => parseKernels(fixture("api-forbidden.json"), NOW)).toThrow(
      /api\/kernels: expected a JSON list, got an object/,
    );
    expect(() => parseKernels(fixture("api-kernels-list-of-strings.json"), NOW)).toThrow(
      /api\/kernels\[0\]: expected a JSON object, got a string/,
    );
  });
});

describe("parseTerminals", () => {
  it("reads terminals and their last activity", () => {
    expect(parseTerminals(fixture("api-terminals-empty.json"), NOW)).toEqual([]);
    const [terminal] = parseTerminals(fixture("api-terminals-one.json"), NOW);
    expect(terminal!.name).toBe("1");
    expect(terminal!.lastActivityAgeSeconds).toBeCloseTo(60.507, 3);
  });

  it("rejects a truncated answer", () => {
    expect(() => parseTerminals(fixture("api-terminals-truncated.json"), NOW)).toThrow(/api\/terminals: not JSON/);
  });
});

describe("parseStatus", () => {
  it("reads the server's last activity, connections and kernel count", () => {
    const status = parseStatus(fixture("api-status-busy.json"), NOW);
    expect(status.connections).toBe(1);
    expect(status.kernels).toBe(1);
    expect(status.lastActivityAgeSeconds).toBeCloseTo(59.803, 3);
    expect(status.startedAgeSeconds).toBeCloseTo(60.965, 3);
    expect(parseStatus(fixture("api-status-fresh.json"), NOW)).toMatchObject({ connections: 0, kernels: 0 });
  });

  it("rejects a truncated answer", () => {
    expect(() => parseStatus(fixture("api-status-truncated.json"), NOW)).toThrow(/api\/status: not JSON/);
  });
});

describe("parseApiInfo", () => {
  it("reads the version", () => {
    expect(parseApiInfo(fixture("api.json"))).toEqual({ version: "1.23.3" });
  });
});

describe("parseJupyterTime", () => {
  it("reads jupyter_server's and notebook's ISO times to the millisecond", () => {
    expect(parseJupyterTime("2026-11-29T14:28:05.784083Z")).toBe(Date.UTC(2026, 10, 29, 14, 28, 5, 784));
    expect(parseJupyterTime("2026-11-29T14:28:05.784083+00:00")).toBe(Date.UTC(2026, 10, 29, 14, 28, 5, 784));
    expect(parseJupyterTime("2026-11-29T16:28:05+02:00")).toBe(Date.UTC(2026, 10, 29, 14, 28, 5));
    expect(parseJupyterTime("2026-11-29T14:28:05")).toBe(Date.UTC(2026, 10, 29, 14, 28, 5));
  });

  it("gives undefined for what is not a time", () => {
    expect(parseJupyterTime("yesterday")).toBeUndefined();
    expect(parseJupyterTime("")).toBeUndefined();
  });
});

describe("parseConfiguredUrl", () => {
  it("moves the token from the query to the header and keeps base_url", () => {
    expect(parseConfiguredUrl("http://127.0.0.1:8888/user/alice/lab?token=abc")).toEqual({
      url: "http://127.0.0.1:8888/user/alice/lab/",
      protocol: "http:",
      host: "127.0.0.1",
      port: 8888,
      basePath: "/user/alice/lab/",
      token: "abc",
      acceptSelfSigned: true,
    });
  });

  it("accepts self-signed certificates on loopback only", () => {
    expect(parseConfiguredUrl("https://localhost:9999/").acceptSelfSigned).toBe(true);
    expect(parseConfiguredUrl("https://[::1]:9999/").acceptSelfSigned).toBe(true);
    expect(parseConfiguredUrl("https://hub.example.org/user/bob/").acceptSelfSigned).toBe(false);
    expect(parseConfiguredUrl("https://hub.example.org/user/bob/").port).toBe(443);
  });

  it("rejects what is not an http(s) URL", () => {
    expect(() => parseConfiguredUrl("localhost:8888")).toThrow(/scheme must be http or https/);
    expect(() => parseConfiguredUrl("not a url")).toThrow(/not a URL/);
  });
});
