// `ws-collector ssh-proxy` against whatever may stand at the start link's address (issue 34 #6,
// issue 40 #2): ws, a site login in front of /start/ (an HTML page, a 302 to an auth proxy, a
// 401), a gateway's JSON error page, `null`, `{}`, an array, a huge body, bytes that are not
// UTF-8, or nothing at all. A real HTTP server sends each answer to the helper's real fetch; the
// helper must never crash, must say what it got in one clear line, and must do what the docs say:
// connect directly unless ws itself answered (a running VM is never locked out), and name the
// login when one is in the way. Fuzzed with fast-check like the collector's listeners
// (edge-fuzz.test.ts), then the named cases through the shipped bundle as a process.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { linksFollowedByPunctuation } from "@ws/protocol";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SshProxyDeps, sshProxyCommand } from "../../packages/collector/src/comeback/ssh-proxy/command.js";
import { collectorBundle, requireBundles } from "../support/process.js";

interface Answer {
  ws?: boolean;
  status: number;
  contentType: string | null;
  location: string | null;
  body: Uint8Array;
}

let dir: string;
let linkFile: string;
let server: http.Server;
let serverPort: number;
let guest: net.Server;
let guestPort: number;
let answer: Answer = { status: 200, contentType: null, location: null, body: new Uint8Array() };

beforeAll(async () => {
  requireBundles();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws40-proxy-"));
  server = http.createServer((req, res) => {
    req.resume();
    const headers: Record<string, string> = {};
    if (answer.contentType !== null) headers["content-type"] = answer.contentType;
    if (answer.location !== null) headers["location"] = answer.location;
    res.writeHead(answer.status, headers);
    res.end(answer.body);
  });
  serverPort = await listen(server);
  linkFile = path.join(dir, "vm.link");
  writeFileSync(linkFile, `http://127.0.0.1:${serverPort}/start/users/alice-gpu?t=s1.abc\n`, { mode: 0o600 });
  // The guest's sshd as a direct connection meets it: a banner, then the end of the connection.
  guest = net.createServer((socket) => socket.end("SSH-2.0-guest\r\n"));
  guestPort = await listen(guest);
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await new Promise((resolve) => guest.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

function listen(target: net.Server): Promise<number> {
  return new Promise((resolve) =>
    target.listen(0, "127.0.0.1", () => resolve((target.address() as net.AddressInfo).port)),
  );
}

const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
const progress = (status: string, extra: Record<string, unknown> = {}) => ({
  vm: { namespace: "users", name: "alice-gpu" },
  status,
  stages: [{ name: "running", label: "VMI running", state: status === "ready" ? "done" : "waiting" }],
  ...extra,
});

/** One run of the helper in this process: what it printed, whether it connected, its exit code. */
async function runHelper(withTerminal: boolean): Promise<{ code: number; lines: string[]; carried: boolean }> {
  const printed: string[] = [];
  let carried = false;
  let clock = 0;
  const deps: SshProxyDeps = {
    openTerminal: () => (withTerminal ? { write: (line) => void printed.push(line), close: () => {} } : undefined),
    fetch: (...args) => fetch(...args),
    carry: async () => {
      carried = true;
      return 0;
    },
    sshAnswers: async () => true,
    sleep: async () => {},
    // Each look at the clock is a minute later: a helper that waits gives up after its --wait.
    nowMs: () => (clock += 60_000),
  };
  const io = {
    stdout: { write: (text: string) => void printed.push(text) },
    stderr: { write: (text: string) => void printed.push(text) },
    env: {},
  };
  const code = await sshProxyCommand(
    ["--link-file", linkFile, "--wait", "5m", "127.0.0.1", String(guestPort)],
    io as never,
    deps,
  );
  const lines = printed.join("").split(/\r?\n/).filter(Boolean);
  return { code, lines, carried };
}

const CONTENT_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "application/problem+json",
  "text/html; charset=utf-8",
  "text/plain",
  "application/octet-stream",
  "",
];

/** A huge body: 3 MiB of "{" (a counterexample prints it as this name, not as its bytes). */
const HUGE = Object.assign(new Uint8Array(3 * 1024 * 1024).fill(0x7b), {
  [fc.toStringMethod]: () => "<3 MiB of '{'>",
});

/** Bodies a gateway, a login or a broken proxy could send. */
const bodies = fc.oneof(
  fc.constantFrom("null", "{}", "[]", '""', "0", "true", '{"error":"internal"}', '{"error":42}', '{"status":"ready"}'),
  fc.jsonValue().map((value) => JSON.stringify(value)),
  fc.string().map((text) => `<!doctype html><title>Sign in</title><form action="/login">${text}</form>`),
  fc.string({ unit: "binary", maxLength: 300 }),
);
const others = fc.record({
  ws: fc.constant(false),
  status: fc.integer({ min: 200, max: 599 }).filter((s) => s !== 204 && s !== 205 && s !== 304),
  contentType: fc.oneof(fc.constantFrom(...CONTENT_TYPES), fc.stringMatching(/^[!-~ ]{0,40}$/), fc.constant(null)),
  location: fc.oneof(fc.constant(null), fc.constantFrom("https://sso.example.com/auth?state=xyz", "/oauth2/start")),
  body: fc.oneof(
    { arbitrary: bodies.map((text) => new TextEncoder().encode(text)), weight: 6 },
    { arbitrary: fc.uint8Array({ maxLength: 400 }), weight: 3 }, // not UTF-8
    { arbitrary: fc.constant(HUGE), weight: 1 },
  ),
});
/** ws's own progress, with any text in what the helper prints (labels, details, the failure). */
const wsProgress = fc.record({
  ws: fc.constant(true),
  status: fc.constantFrom(200, 202),
  contentType: fc.constantFrom("application/json", "application/json; charset=utf-8"),
  location: fc.constant(null),
  body: fc
    .record({
      status: fc.constantFrom("stopped", "starting", "unschedulable", "ready", "failed"),
      label: fc.string(),
      detail: fc.string(),
      failure: fc.string(),
      running: fc.constantFrom("done", "current", "waiting"),
    })
    .map(({ status, label, detail, failure, running }) =>
      json({
        ...progress(status),
        stages: [{ name: "running", label, state: running, detail }],
        ...(status === "failed" ? { failure } : {}),
      }),
    ),
});

/** What the helper must call a login in the way (the order the docs give: a redirect, a login status, an HTML page). */
function loginInTheWay(served: Answer): boolean {
  if ((served.status >= 300 && served.status < 400) || [401, 403, 407].includes(served.status)) return true;
  const text = new TextDecoder().decode(served.body);
  let refusal = false;
  if ([400, 404, 405, 410].includes(served.status) && /[/+]json\b/i.test(served.contentType ?? ""))
    try {
      const parsed = JSON.parse(text);
      refusal = typeof parsed === "object" && parsed !== null && typeof parsed.error === "string";
    } catch {}
  return !refusal && (/html/i.test(served.contentType ?? "") || /^\s*</.test(text));
}

describe("ssh-proxy and any answer at the start link's address (issue 34 #6, issue 40 #2)", () => {
  it("fuzz: any status, content type and body → no crash, one clear line each, a defined outcome", async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(others, wsProgress), fc.boolean(), async (fuzzed, withTerminal) => {
        answer = fuzzed;
        const run = await runHelper(withTerminal);
        expect([0, 1]).toContain(run.code);
        // One line per message, nothing a terminal would interpret, nothing unbounded.
        for (const line of run.lines) {
          expect(line).toMatch(/^ws: /);
          // biome-ignore lint/suspicious/noControlCharactersInRegex: what must not reach the terminal
          expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
          expect(line.length).toBeLessThan(1100);
          expect(linksFollowedByPunctuation(line)).toEqual([]); // a link printed is copied whole (issue 40 #6)
        }
        if (!fuzzed.ws) {
          // Not ws's progress: one line saying what answered, then a direct connection (a running VM
          // is never locked out), never "does not answer" (something did).
          expect(run).toMatchObject({ code: 0, carried: true });
          expect(run.lines).toHaveLength(1);
          expect(run.lines[0]).toMatch(/; connecting directly$/);
          expect(run.lines[0]).not.toContain("does not answer");
          if (loginInTheWay(fuzzed)) expect(run.lines[0]).toContain("/start/ must be reachable without the site login");
          else expect(run.lines[0]).not.toContain("login");
          return;
        }
        const status = JSON.parse(new TextDecoder().decode(fuzzed.body)).status;
        if (status === "ready") expect(run).toEqual({ code: 0, lines: [], carried: true });
        if (status === "stopped" && !withTerminal) expect([run.code, run.carried]).toEqual([1, false]);
      }),
      {
        numRuns: 300,
        // Fetch turns a 407 into a network error: it is still a login in the way, not "no answer".
        examples: [
          [{ ws: false, status: 407, contentType: "", location: null, body: new TextEncoder().encode("false") }, false],
        ],
      },
    );
  }, 180_000);

  it("ws's own answers: ready connects, stopped without a terminal refuses with the link, a refusal still connects", async () => {
    answer = { status: 200, contentType: "application/json", location: null, body: json(progress("ready")) };
    expect(await runHelper(false)).toEqual({ code: 0, lines: [], carried: true });
    answer = { status: 200, contentType: "application/json", location: null, body: json(progress("stopped")) };
    const stopped = await runHelper(false);
    expect([stopped.code, stopped.carried]).toEqual([1, false]);
    expect(stopped.lines.join("\n")).toContain(
      `ws: start it with its start link: http://127.0.0.1:${serverPort}/start/users/alice-gpu?t=s1.abc`,
    );
    answer = {
      status: 410,
      contentType: "application/json",
      location: null,
      body: json({ error: "start link expired" }),
    };
    const refused = await runHelper(true);
    expect([refused.code, refused.carried]).toEqual([0, true]);
    expect(refused.lines).toEqual([
      "ws: the start link was refused (start link expired): get a new one from the VM's page or the last stop message; connecting directly",
    ]);
  });

  /** The shipped helper as OpenSSH runs it, against `served`: its exit code, stdout (the SSH stream) and stderr. */
  async function shipped(served: Answer): Promise<{ status: number | null; stdout: string; stderr: string }> {
    answer = served;
    // Not spawnSync: the answer comes from this process's own HTTP server.
    const child = spawn(process.execPath, [
      collectorBundle,
      "ssh-proxy",
      "--link-file",
      linkFile,
      "127.0.0.1",
      String(guestPort),
    ]);
    child.stdin.end();
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    const status = await new Promise<number | null>((resolve) => child.on("close", resolve));
    return { status, stdout, stderr };
  }

  it("the shipped binary: null, {}, a gateway's JSON 500, a login page, a redirect to the login, a 401 → a clear line and a direct connection", async () => {
    const cases: Array<[Answer, RegExp]> = [
      [
        { status: 200, contentType: "application/json", location: null, body: json(null) },
        /answered HTTP 200 \(application\/json\), which is not ws's answer/,
      ],
      [
        { status: 200, contentType: "application/json", location: null, body: json({}) },
        /answered HTTP 200 \(application\/json\), which is not ws's answer/,
      ],
      [
        { status: 500, contentType: "application/json", location: null, body: json({ error: "upstream failed" }) },
        /answered HTTP 500 \(application\/json\), which is not ws's answer \(a gateway or proxy/,
      ],
      [
        {
          status: 200,
          contentType: "text/html",
          location: null,
          body: new TextEncoder().encode("<html><form action=/login>Sign in</form></html>"),
        },
        /answered with an HTML page \(HTTP 200 \(text\/html\)\), not ws's answer: a login page\? \/start\/ must be reachable without the site login .*docs\/install\.md/,
      ],
      [
        {
          status: 302,
          contentType: null,
          location: "https://sso.example.com/auth?state=secret",
          body: new Uint8Array(),
        },
        /answered with a redirect to https:\/\/sso\.example\.com\/auth \(HTTP 302\), a login in front of it: \/start\/ must be reachable without the site login/,
      ],
      [
        { status: 401, contentType: "text/plain", location: null, body: new TextEncoder().encode("Unauthorized") },
        /asks for a login \(HTTP 401 \(text\/plain\)\): \/start\/ must be reachable without the site login/,
      ],
    ];
    for (const [served, said] of cases) {
      const run = await shipped(served);
      expect(run.stderr, JSON.stringify(served.status)).toMatch(said);
      expect(run.stderr).toMatch(/; connecting directly\n$/);
      expect(run.stderr).not.toContain("does not answer");
      expect(run.stderr).not.toContain("TypeError");
      expect(run.stderr).not.toContain("secret"); // a redirect's query (an auth proxy's state) is not echoed
      // The direct connection reached the guest: its banner is on the SSH stream.
      expect([run.status, run.stdout]).toEqual([0, "SSH-2.0-guest\r\n"]);
    }
  });
});
