import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { chmod, lstat, mkdir, open, readlink, rename, rm, symlink, unlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { describeFailure, type CommandRunner } from "../grow/exec.js";
import { describeAction, type SealAction, type SealOperation } from "./plan.js";
import { resolveInRoot } from "./rootfs.js";

export type ActionStatus = "done" | "failed" | "planned";
export type OperationStatus = "done" | "nothing-to-do" | "skipped" | "failed" | "planned";

export interface ActionResult {
  action: SealAction;
  description: string;
  status: ActionStatus;
  error: string | null;
}

export interface OperationResult {
  id: SealOperation["id"];
  title: string;
  status: OperationStatus;
  skipped: string | null;
  problems: string[];
  notes: string[];
  actions: ActionResult[];
}

function errorText(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  const message = error instanceof Error ? error.message : String(error);
  return code && !message.includes(code) ? `${code}: ${message}` : message;
}

/** Writes through a temporary file and a rename, so a crash never leaves half a file. */
async function writeAtomically(hostPath: string, content: string, mode: number): Promise<void> {
  await mkdir(path.dirname(hostPath), { recursive: true });
  const temporary = path.join(
    path.dirname(hostPath),
    `.${path.basename(hostPath)}.ws-seal-${randomBytes(4).toString("hex")}`,
  );
  try {
    await writeFile(temporary, content, { mode, flag: "wx" });
    await chmod(temporary, mode);
    await rename(temporary, hostPath);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

async function perform(root: string, action: SealAction, run: CommandRunner): Promise<void> {
  switch (action.kind) {
    case "run": {
      const result = await run(action.argv);
      if (result.exitCode !== 0) throw new Error(describeFailure(action.argv, result));
      return;
    }
    case "remove": {
      const hostPath = await resolveInRoot(root, action.path);
      const existing = await lstat(hostPath).catch(() => null);
      if (!existing) return;
      // unlink for anything but a directory: rm's recursive fallback would turn EPERM into ENOTDIR.
      // Neither follows symlinks, the last one or any inside a removed directory.
      if (existing.isDirectory()) await rm(hostPath, { recursive: true, force: true });
      else await unlink(hostPath);
      return;
    }
    case "truncate": {
      const hostPath = await resolveInRoot(root, action.path);
      const handle = await open(hostPath, constants.O_WRONLY | constants.O_NOFOLLOW);
      try {
        if (!(await handle.stat()).isFile()) throw new Error(`${action.path} is not a regular file`);
        await handle.truncate(0);
      } finally {
        await handle.close();
      }
      return;
    }
    case "write":
      await writeAtomically(await resolveInRoot(root, action.path), action.content, action.mode);
      return;
    case "symlink": {
      const hostPath = await resolveInRoot(root, action.path);
      const existing = await lstat(hostPath).catch(() => null);
      if (existing?.isSymbolicLink() && (await readlink(hostPath)) === action.target) return;
      if (existing) await rm(hostPath, { force: true });
      await mkdir(path.dirname(hostPath), { recursive: true });
      await symlink(action.target, hostPath);
      return;
    }
  }
}

/**
 * Runs every operation's actions. A failed action is recorded and the rest go on: one
 * immutable file must not leave the host keys in place.
 */
export async function executeSeal(
  root: string,
  operations: SealOperation[],
  run: CommandRunner,
): Promise<OperationResult[]> {
  const results: OperationResult[] = [];
  for (const operation of operations) {
    const actions: ActionResult[] = [];
    for (const action of operation.actions) {
      try {
        await perform(root, action, run);
        actions.push({ action, description: describeAction(action), status: "done", error: null });
      } catch (error) {
        actions.push({ action, description: describeAction(action), status: "failed", error: errorText(error) });
      }
    }
    results.push(resultOf(operation, actions, false));
  }
  return results;
}

export function plannedResults(operations: SealOperation[]): OperationResult[] {
  return operations.map((operation) =>
    resultOf(
      operation,
      operation.actions.map((action) => ({
        action,
        description: describeAction(action),
        status: "planned",
        error: null,
      })),
      true,
    ),
  );
}

function resultOf(operation: SealOperation, actions: ActionResult[], dryRun: boolean): OperationResult {
  let status: OperationStatus;
  if (operation.problems.length > 0 || actions.some((a) => a.status === "failed")) status = "failed";
  else if (operation.skipped !== null) status = "skipped";
  else if (actions.length === 0) status = "nothing-to-do";
  else status = dryRun ? "planned" : "done";
  return {
    id: operation.id,
    title: operation.title,
    status,
    skipped: operation.skipped,
    problems: operation.problems,
    notes: operation.notes,
    actions,
  };
}
