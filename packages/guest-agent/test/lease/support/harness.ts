// A real LeaseService in this process: temp state dir, socket under a temp
// "/run", notices to the terminals a test names (never to every pty on the
// machine: other tests' terminals are none of ours).
import { chmod, mkdir, mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:net";
import os from "node:os";
import path from "node:path";
import { systemClock, type Clock } from "../../../src/clock.js";
import { LeaseService } from "../../../src/lease/service.js";
import { NoticeDelivery } from "../../../src/notice/delivery.js";
import type { Scheduler } from "../../../src/notice/schedule.js";
import type { TerminalTarget } from "../../../src/notice/terminals.js";
import { defaultRoots, type Roots } from "../../../src/roots.js";
import { loadUsers } from "../../../src/users.js";

export interface Harness {
  base: string;
  roots: Roots;
  socketPath: string;
  stateDir: string;
  noticeFile: string;
  logs: string[];
  /** Terminals notices go to; tests push their own ptys here. */
  terminals: TerminalTarget[];
  service: LeaseService;
  notifier: NoticeDelivery;
  restart(): Promise<void>;
  stop(): Promise<void>;
  remove(): Promise<void>;
}

export async function startHarness(
  options: {
    clock?: Clock;
    scheduler?: Scheduler;
    onLeasesChanged?: () => void;
    beforeOpen?: (socketPath: string) => Promise<void>;
  } = {},
): Promise<Harness> {
  const base = await mkdtemp(path.join(os.tmpdir(), "ws-lease-svc-"));
  await chmod(base, 0o755); // the test users must reach the socket inside
  const roots: Roots = { ...defaultRoots, run: path.join(base, "run"), state: path.join(base, "state") };
  await mkdir(roots.run, { mode: 0o755 });
  await chmod(roots.run, 0o755);
  const clock = options.clock ?? systemClock;
  const logs: string[] = [];
  const terminals: TerminalTarget[] = [];
  const socketPath = path.join(roots.run, "ws-agent", "agent.sock");
  const open = async (): Promise<{ service: LeaseService; notifier: NoticeDelivery }> => {
    const users = await loadUsers(roots);
    const log = (line: string): void => {
      logs.push(line);
    };
    const notifier = new NoticeDelivery({
      roots,
      users,
      clock,
      log,
      listTerminals: async () => [...terminals],
      desktop: false,
      timeZone: "UTC",
      ...(options.scheduler ? { scheduler: options.scheduler } : {}),
    });
    const service = await LeaseService.open({
      stateDir: roots.state,
      socketPath,
      clock,
      users,
      roots,
      log,
      notifier,
      ...(options.onLeasesChanged ? { onLeasesChanged: options.onLeasesChanged } : {}),
      listenRetryMs: 50,
    });
    return { service, notifier };
  };
  await options.beforeOpen?.(socketPath);
  const opened = await open();
  const harness: Harness = {
    base,
    roots,
    socketPath,
    stateDir: roots.state,
    noticeFile: path.join(roots.run, "ws-agent", "notice.json"),
    logs,
    terminals,
    service: opened.service,
    notifier: opened.notifier,
    async restart() {
      await harness.service.close();
      const next = await open();
      harness.service = next.service;
      harness.notifier = next.notifier;
    },
    async stop() {
      await harness.service.close();
    },
    async remove() {
      await harness.service.close().catch(() => undefined);
      await rm(base, { recursive: true, force: true });
    },
  };
  return harness;
}

/** Sends raw lines on the socket, without answering the identity challenge; returns every line received. */
export async function rawLines(
  socketPath: string,
  lines: string[],
  expectAnswers: number,
  timeoutMs = 20_000,
): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(socketPath);
    const received: string[] = [];
    let buffer = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer; got ${JSON.stringify(received)}`));
    }, timeoutMs);
    socket.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on("data", (chunk) => {
      buffer += chunk.toString("utf8");
      const parts = buffer.split("\n");
      buffer = parts.pop() ?? "";
      for (const part of parts) {
        received.push(part);
        if (received.length === 1) for (const line of lines) socket.write(`${line}\n`);
        if (received.length === 1 + expectAnswers) {
          clearTimeout(timer);
          socket.end();
          resolve(received);
        }
      }
    });
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(received);
    });
  });
}

/** Polls until `check` returns true. */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
