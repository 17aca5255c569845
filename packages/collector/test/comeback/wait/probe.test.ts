import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { parseStartConfig } from "../../../src/comeback/start/config.js";
import type { StartFacts } from "../../../src/comeback/start/platform.js";
import { startProgress } from "../../../src/comeback/start/progress.js";
import { EntryProber, probePortFor, sshAnswers } from "../../../src/comeback/wait/probe.js";

const servers: net.Server[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

/** A real listener on 127.0.0.1 that greets each connection with `greeting` (or nothing). */
async function listener(greeting: string | undefined): Promise<number> {
  const server = net.createServer((socket) => {
    if (greeting !== undefined) socket.end(greeting);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as net.AddressInfo).port;
}

describe("the collector's own look at the entry service", () => {
  it("an SSH banner answers; another protocol, a silent peer or a closed port does not", async () => {
    expect(await sshAnswers("127.0.0.1", await listener("SSH-2.0-OpenSSH_9.2p1\r\n"))).toBe(true);
    expect(await sshAnswers("127.0.0.1", await listener("HTTP/1.1 400 Bad Request\r\n\r\n"))).toBe(false);
    expect(await sshAnswers("127.0.0.1", await listener(undefined), 200)).toBe(false);
    const closed = await listener(undefined);
    servers.pop()!.close();
    expect(await sshAnswers("127.0.0.1", closed)).toBe(false);
  });

  it("probes only for entry services sshd satisfies, and not when the port is 0", () => {
    expect(probePortFor("sshd", 22)).toBe(22);
    expect(probePortFor("any", 2222)).toBe(2222);
    expect(probePortFor("jupyter", 22)).toBeUndefined();
    expect(probePortFor("sshd", 0)).toBeUndefined();
    const problems: string[] = [];
    expect(parseStartConfig({}, problems).probePort).toBe(22);
    expect(parseStartConfig({ probePort: 0 }, problems).probePort).toBe(0);
    parseStartConfig({ probePort: "22" }, problems);
    parseStartConfig({ probePort: 70000 }, problems);
    expect(problems).toEqual([
      "start.probePort: expected a port (1-65535), or 0 for no probe",
      "start.probePort: expected a port (1-65535), or 0 for no probe",
    ]);
  });

  it("one look per VM at a time; an answer belongs to the start it was made for", async () => {
    let clock = 1000;
    let release: (ok: boolean) => void = () => {};
    const looks: string[] = [];
    const prober = new EntryProber(
      (host, port) => {
        looks.push(`${host}:${port}`);
        return new Promise((resolve) => (release = resolve));
      },
      () => clock,
    );
    prober.probe("lab/h36w", 500, ["10.244.0.7"], 22);
    prober.probe("lab/h36w", 500, ["10.244.0.7"], 22);
    expect(looks).toEqual(["10.244.0.7:22"]);
    clock = 4000;
    release(true);
    await new Promise((resolve) => setImmediate(resolve));
    expect(prober.answeredFor("lab/h36w", 500)).toEqual({
      atMs: 4000,
      detail: "sshd answers on 10.244.0.7:22 (the collector's probe)",
    });
    // A later start of the same VM is not answered by the earlier boot's sshd.
    expect(prober.answeredFor("lab/h36w", 9000)).toBeUndefined();
    prober.forget("lab/h36w");
    expect(prober.answeredFor("lab/h36w", 500)).toBeUndefined();
  });

  it("Ready comes from the probe before the agent connects, for a running VMI of this start", () => {
    const T0 = 1_000_000;
    const facts: StartFacts = {
      owner: "h36w-ada",
      runStrategy: "Manual",
      status: "Running",
      allocates: [],
      wantsToRun: true,
      instance: {
        phase: "Running",
        nodeName: "node-1",
        createdAtMs: T0 + 1000,
        phaseTimes: { Scheduled: T0 + 2000, Running: T0 + 5000 },
        unschedulable: null,
      },
      lastStop: null,
      labels: {},
      annotations: {},
    };
    const attempt = { requestedAtMs: T0, by: "h36w-ada", trigger: "link", result: { ok: true, message: "" } };
    const waiting = { ready: false, detail: "no report from the agent yet" };
    const probed = { atMs: T0 + 30_000, detail: "sshd answers on 10.244.0.7:22 (the collector's probe)" };
    const p = startProgress(facts, attempt, { readiness: waiting, probed }, T0 + 31_000);
    expect(p.status).toBe("ready");
    expect(p.stages.find((stage) => stage.name === "ready")).toMatchObject({
      state: "done",
      atMs: T0 + 30_000,
      detail: probed.detail,
    });
    // An answer from before this start (the previous boot's) does not count.
    const stale = startProgress(
      facts,
      attempt,
      { readiness: waiting, probed: { ...probed, atMs: T0 - 1 } },
      T0 + 31_000,
    );
    expect(stale.status).toBe("starting");
  });
});
