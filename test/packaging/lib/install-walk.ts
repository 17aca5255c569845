// Walks the shell blocks of docs/install.md against the fake API server, as a platform engineer
// would type them: `kubectl apply` creates the documents of the named file, `kubectl wait` fails
// at once on an object that does not exist (kubectl's NotFound) and otherwise waits for the
// condition, the golden-image build ends with the guest powering itself off. Commands the walk
// cannot perform (in the guest, `exec` into the collector) are returned, not silently dropped.
import { parseAllDocuments } from "yaml";
import { resourceByKind, type FakeKube } from "../../support/fake-kube/index.js";

const resourceVmi = resourceByKind("VirtualMachineInstance");

type Obj = Record<string, any>; // manifests as parsed

/** A section's fenced blocks, in order. */
export interface Block {
  lang: string;
  text: string;
}

export function sectionBlocks(markdown: string, fromHeading: string, toHeading: string): Block[] {
  const start = markdown.indexOf(fromHeading);
  const end = markdown.indexOf(toHeading, start + 1);
  if (start < 0 || end < 0) throw new Error(`install walk: no section between "${fromHeading}" and "${toHeading}"`);
  const section = markdown.slice(start, end);
  return [...section.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, text: m[2]! }));
}

/** Shell lines with continuations joined and comments dropped. */
export function shellCommands(text: string): string[] {
  return text
    .replace(/\\\n\s*/g, " ")
    .split("\n")
    .map((line) => line.replace(/(^|\s)#.*$/, "").trim())
    .filter((line) => line !== "");
}

/** Words of one command line: whitespace-separated, single and double quotes kept together. */
export function shellWords(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let quote: string | null = null;
  let any = false;
  for (const ch of line) {
    if (quote) {
      if (ch === quote) quote = null;
      else word += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      any = true;
    } else if (/\s/.test(ch)) {
      if (any || word !== "") words.push(word);
      word = "";
      any = false;
    } else word += ch;
  }
  if (any || word !== "") words.push(word);
  return words;
}

const KINDS: Record<string, { path: string; kind: string }> = {
  dv: { path: "/apis/cdi.kubevirt.io/v1beta1", kind: "datavolumes" },
  datavolume: { path: "/apis/cdi.kubevirt.io/v1beta1", kind: "datavolumes" },
  vm: { path: "/apis/kubevirt.io/v1", kind: "virtualmachines" },
  vmi: { path: "/apis/kubevirt.io/v1", kind: "virtualmachineinstances" },
  secret: { path: "/api/v1", kind: "secrets" },
};
const API_OF_KIND: Record<string, string> = {
  DataVolume: "dv",
  VirtualMachine: "vm",
  Secret: "secret",
};

export class WalkError extends Error {
  override name = "WalkError";
}

export interface WalkOptions {
  /** The manifests `kubectl apply -f NAME` reads, by NAME. */
  files: Record<string, string>;
  /** Real time a `kubectl wait` is given (the docs' --timeout is cluster time). */
  waitMs: number;
}

export interface WalkResult {
  /** Each command performed, in order. */
  performed: string[];
  /** Commands the walk does not perform, in order. */
  notWalked: string[];
}

export class InstallWalk {
  constructor(
    private readonly fake: FakeKube,
    private readonly options: WalkOptions,
  ) {}

  private async api(method: string, path: string, body?: unknown): Promise<{ status: number; json: Obj }> {
    const res = await fetch(this.fake.url + path, {
      method,
      headers: {
        Authorization: `Bearer ${this.fake.token}`,
        ...(body !== undefined ? { "Content-Type": "application/json" } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, json: text ? (JSON.parse(text) as Obj) : {} };
  }

  private objectPath(kindAlias: string, namespace: string, name?: string): string {
    const kind = KINDS[kindAlias.toLowerCase()];
    if (!kind) throw new WalkError(`install walk: kubectl resource "${kindAlias}" is not one the walk knows`);
    return `${kind.path}/namespaces/${namespace}/${kind.kind}${name ? `/${name}` : ""}`;
  }

  async run(commands: string[]): Promise<WalkResult> {
    const result: WalkResult = { performed: [], notWalked: [] };
    for (const line of commands) {
      const words = shellWords(line);
      if (words[0] === "kubectl") {
        if (await this.kubectl(words.slice(1), line)) result.performed.push(line);
        else result.notWalked.push(line);
      } else if (words[0] === "packaging/golden-image/build.sh") {
        this.build(words);
        result.performed.push(line);
      } else result.notWalked.push(line);
    }
    return result;
  }

  /** The golden-image build: reaches the VMI named in its ProxyCommand, ends with the guest's poweroff. */
  private build(words: string[]): void {
    const proxy = words.find((w) => w.startsWith("ProxyCommand="));
    const target = proxy && /vmi\/([a-z0-9-]+)\.([a-z0-9-]+)/.exec(proxy);
    if (!target) throw new WalkError("install walk: build.sh without a ProxyCommand naming vmi/NAME.NAMESPACE");
    const [, name, namespace] = target;
    const vmi = this.fake.store.get(resourceVmi, namespace!, name!);
    const phase = (vmi?.["status"] as Obj | undefined)?.["phase"];
    if (phase !== "Running") {
      throw new WalkError(
        `install walk: build.sh cannot reach vmi/${name} in ${namespace}: it is ${vmi ? phase : "not there"}`,
      );
    }
    this.fake.guestPowerOff(namespace!, name!);
  }

  private async kubectl(args: string[], line: string): Promise<boolean> {
    let namespace = "default";
    const rest: string[] = [];
    for (let i = 0; i < args.length; i++) {
      if (args[i] === "-n") namespace = args[++i]!;
      else rest.push(args[i]!);
    }
    const [verb, ...operands] = rest;
    switch (verb) {
      case "create":
        if (operands[0] === "namespace") return true; // the fake serves every namespace
        return false;
      case "apply": {
        const file = operands[operands.indexOf("-f") + 1];
        const text = file === undefined ? undefined : this.options.files[file];
        if (text === undefined) throw new WalkError(`install walk: ${line}: the walk has no file "${file}"`);
        for (const doc of parseAllDocuments(text)) {
          const obj = doc.toJS() as Obj | null;
          if (!obj) continue;
          const alias = API_OF_KIND[obj.kind as string];
          if (!alias) throw new WalkError(`install walk: ${line}: kind ${obj.kind} is not one the walk applies`);
          const ns = obj.metadata?.namespace ?? namespace;
          const created = await this.api("POST", this.objectPath(alias, ns), obj);
          if (created.status !== 201) {
            throw new WalkError(
              `install walk: ${line}: ${obj.kind} ${obj.metadata?.name}: ${created.status} ${created.json.message}`,
            );
          }
        }
        return true;
      }
      case "wait":
        await this.wait(operands, namespace, line);
        return true;
      case "delete": {
        const [kind, name] = operands;
        const deleted = await this.api("DELETE", this.objectPath(kind!, namespace, name));
        if (deleted.status !== 200)
          throw new WalkError(`install walk: ${line}: ${deleted.status} ${deleted.json.message}`);
        return true;
      }
      default:
        return false;
    }
  }

  private async wait(operands: string[], namespace: string, line: string): Promise<void> {
    const target = operands.find((o) => o.includes("/") && !o.startsWith("--"));
    const forArg = operands.find((o) => o.startsWith("--for="))?.slice("--for=".length);
    if (!target || !forArg) throw new WalkError(`install walk: ${line}: kubectl wait needs KIND/NAME and --for`);
    const [kind, name] = target.split("/") as [string, string];
    const path = this.objectPath(kind, namespace, name);
    const first = await this.api("GET", path);
    if (first.status === 404) {
      // kubectl wait on a named object that does not exist fails at once; it does not wait for it.
      throw new WalkError(`install walk: ${line}: Error from server (NotFound): ${first.json.message}`);
    }
    const satisfied = (obj: Obj): boolean => {
      const condition = /^condition=(\w+)$/.exec(forArg);
      if (condition) {
        return ((obj.status?.conditions ?? []) as Obj[]).some((c) => c.type === condition[1] && c.status === "True");
      }
      const jsonpath = /^jsonpath=\{\.([\w.]+)\}=(.*)$/.exec(forArg);
      if (jsonpath) {
        const value = jsonpath[1]!.split(".").reduce<unknown>((v, k) => (v as Obj | undefined)?.[k], obj);
        return value === jsonpath[2];
      }
      throw new WalkError(`install walk: ${line}: --for=${forArg} is not a form the walk knows`);
    };
    const deadline = Date.now() + this.options.waitMs;
    for (;;) {
      const current = await this.api("GET", path);
      if (current.status === 200 && satisfied(current.json)) return;
      if (Date.now() > deadline) {
        throw new WalkError(`install walk: ${line}: timed out (status ${JSON.stringify(current.json.status ?? {})})`);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}
