// What a long-running program does with an error nobody handled (docs/security.md, "Errors nobody
// handled"). Both programs install it once, at the start of their serving command.
//
// - A promise rejection nobody awaited ended one piece of work (a request, a timer's task); the
//   process's own state is not half-changed by it, so the program logs it with context, counts it
//   and keeps serving. Node's default (exit 1 without a word of context) is what let one malformed
//   HTTP request end the collector.
// - An exception thrown out of an event callback left that callback's invariants half-done, and
//   Node documents that resuming after one is unsafe: the program logs it, counts it and exits 70
//   (EX_SOFTWARE) so its supervisor (systemd, the Deployment) restarts it. Deliberate and loud,
//   never silent; every listener catches its own input errors so a request never gets here.
import { errorMessage } from "./errors.js";
import type { Logger } from "./logfmt.js";

export type UnhandledKind = "rejection" | "exception";

export interface UnhandledErrorCounts {
  rejection: number;
  exception: number;
}

/** The exit status after an uncaught exception (sysexits.h EX_SOFTWARE: an internal error). */
export const UNCAUGHT_EXCEPTION_EXIT_CODE = 70;

/** Longest error text logged: a stack is context, a megabyte of it is a log flood. */
const MAX_LOGGED_CHARS = 2000;

export interface UnhandledErrorPolicyOptions {
  log: Logger;
  /** Where the counts go (a metric reads them); incremented before the log line. */
  counts?: UnhandledErrorCounts;
  /** Called instead of process.exit after an uncaught exception (tests). */
  exit?: (code: number) => void;
  /** The process whose events are handled (tests pass an EventEmitter). */
  target?: Pick<NodeJS.Process, "on" | "off">;
}

/** The text logged for an error nobody handled: its stack (or message), bounded. */
export function describeUnhandled(error: unknown): string {
  const text = error instanceof Error ? (error.stack ?? errorMessage(error)) : errorMessage(error);
  return text.length > MAX_LOGGED_CHARS ? `${text.slice(0, MAX_LOGGED_CHARS)}… (cut)` : text;
}

/** Installs the policy; returns the function that removes it. */
export function installUnhandledErrorPolicy(options: UnhandledErrorPolicyOptions): () => void {
  const target = options.target ?? process;
  const counts = options.counts ?? { rejection: 0, exception: 0 };
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const onRejection = (reason: unknown) => {
    counts.rejection++;
    options.log("error", "unhandled promise rejection (a bug: reported, the process keeps serving)", {
      kind: "rejection",
      total: counts.rejection,
      error: describeUnhandled(reason),
    });
  };
  const onException = (error: unknown, origin?: string) => {
    counts.exception++;
    options.log(
      "error",
      `uncaught exception (a bug): exiting with ${UNCAUGHT_EXCEPTION_EXIT_CODE} so the supervisor restarts the process`,
      { kind: "exception", origin, total: counts.exception, error: describeUnhandled(error) },
    );
    exit(UNCAUGHT_EXCEPTION_EXIT_CODE);
  };
  target.on("unhandledRejection", onRejection);
  target.on("uncaughtException", onException);
  return () => {
    target.off("unhandledRejection", onRejection);
    target.off("uncaughtException", onException);
  };
}
