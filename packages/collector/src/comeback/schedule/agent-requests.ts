// `ws-lease schedule` reaches the collector inside a Report (its schedule_requests) and is answered
// in a Directive of its own (schedule_answers), once per request id. The agent sends a request in
// every Report until it hears back, so an answer is remembered (bounded) and sent again rather
// than the change made twice. Who asked is the agent's word for the caller (the kernel's uid
// turned into a name); only the VM's own agent stream can ask, as for its leases.
import { create } from "@bufbuild/protobuf";
import { DirectiveSchema, type Report, ScheduleAnswerSchema, type ScheduleAnswer } from "@ws/protocol";
import type { AgentSession } from "../../agents/server.js";
import { vmId } from "../../model/vm-key.js";
import type { ScheduleChange, ScheduleEditor } from "./editor.js";

/** A Report carries at most this many requests that are looked at; the rest wait for the next one. */
const MAX_PER_REPORT = 8;
/** Answers remembered, over all VMs (oldest forgotten first). */
const MAX_REMEMBERED = 10_000;

export class ScheduleAgentRequests {
  private readonly answers = new Map<string, ScheduleAnswer>();
  private readonly inFlight = new Set<string>();

  constructor(private readonly editor: ScheduleEditor) {}

  /** Looks at a Report's schedule requests; answers each (now or when its change is kept). */
  handle(session: AgentSession, report: Report): void {
    for (const request of report.scheduleRequests.slice(0, MAX_PER_REPORT)) {
      const key = `${vmId(session.vm)} ${request.id}`;
      const known = this.answers.get(key);
      if (known) {
        send(session, known);
        continue;
      }
      if (this.inFlight.has(key)) continue;
      this.inFlight.add(key);
      void this.answer(session, request).then((answer) => {
        this.inFlight.delete(key);
        this.answers.set(key, answer);
        while (this.answers.size > MAX_REMEMBERED) this.answers.delete(this.answers.keys().next().value!);
        send(session, answer);
      });
    }
  }

  private async answer(session: AgentSession, request: Report["scheduleRequests"][number]): Promise<ScheduleAnswer> {
    const reply = (ok: boolean, message: string, status?: unknown) =>
      create(ScheduleAnswerSchema, {
        id: request.id,
        ok,
        message,
        statusJson: status === undefined ? "" : JSON.stringify(status),
      });
    const vm = session.vm;
    if ([request.line, request.timeZone, request.date].some((text) => text.length > 300))
      return reply(false, "a schedule request's text is at most 300 characters");
    if (request.op === "status") {
      const status = this.editor.status(vm);
      return reply(true, status ? "" : "no start schedule", status);
    }
    const change: ScheduleChange | undefined =
      request.op === "set"
        ? { kind: "set", line: request.line, ...(request.timeZone ? { timeZone: request.timeZone } : {}) }
        : request.op === "clear"
          ? { kind: "clear" }
          : request.op === "skip"
            ? { kind: "skip", date: request.date || "tomorrow" }
            : undefined;
    if (!change) return reply(false, `unknown schedule request "${request.op.slice(0, 20)}"`);
    const outcome = await this.editor.change(
      vm,
      change,
      `${request.user.slice(0, 64) || "a user"} with ws-lease in the VM`,
    );
    return outcome.ok ? reply(true, outcome.message, outcome.status) : reply(false, outcome.error);
  }
}

function send(session: AgentSession, answer: ScheduleAnswer): void {
  session.send(create(DirectiveSchema, { scheduleAnswers: [answer] }));
}
