/**
 * Generation of the clear_gpu cell: visible, commented, self-contained Python
 * that frees what only stale references keep alive.
 *
 * The cell works without the extension (a colleague can re-run it). It never
 * deletes a variable the user still names; it drops output-cache entries that
 * hold stale models, the last exception's traceback, then runs
 * `gc.collect()` and `torch.cuda.empty_cache()` when CUDA is initialised. It
 * ends without a bare expression, so it pins nothing in the output cache
 * itself. At most 25 lines, each within 79 columns ({@link generateCleanCell}).
 *
 * The VRAM panel plans for one model: "free" drops only what holds that stale
 * model, and "delete…" (after the user confirmed) starts with `del name` for
 * the variables that name it — valid Python identifiers only.
 */
import type { IInventory, IModelInfo, IRootBytes } from '../../protocol';
import { CLEAN_MARKER } from '../../protocol-constants';
import type { IPlanOptions } from './clean-plan-options';
import {
  formatBytes,
  formatPlacement,
  isCudaDevice,
  sumBytes
} from '../format';
import { commentSafe, isPythonIdentifier } from '../python';
import { holderNames } from '../memory/stacking';
import { cleanLeaves } from '../memory/holders';

// Written in python.ts (start-path code needs them; this module loads with the commands that
// insert a cell); re-exported for the callers that generate cells anyway.
export { commentSafe, isPythonIdentifier };

/** What a clean cell will do, derived from an inventory. */
export interface ICleanPlan {
  /** Output-cache execution counts to drop (`Out[n]` and `_n`). */
  outKeys: number[];
  /** Stale models the plan expects to free: it drops every holder ({@link cleanLeaves}). */
  staleModels: IModelInfo[];
  /**
   * Stale models the plan drops the output-cache entries of but may not
   * free: a holder it leaves alone (a user's own `_`, `Out['3']`), by name.
   * Absent when there is none.
   */
  heldModels?: Array<{ label: string; by: string[] }>;
  /** User variables that hold models and are kept. */
  keptNames: string[];
  /** Bytes of the stale models (all devices), as reported by the agent. */
  staleBytes: number;
  /** Model id the plan is limited to, or null for every stale model. */
  modelId: string | null;
  /** User variables to delete first (valid Python identifiers only; asked for by the user). */
  deleteNames: string[];
  /**
   * Of `deleteNames`, what each held when the inventory was built
   * (`hex(id())`, the holder's `valueId`; absent from older agents): the cell
   * deletes a name only while it still holds that very object, and says so
   * for one it leaves.
   */
  deleteIds?: Record<string, string>;
  /** Whether the cell clears the last exception's traceback. */
  clearTraceback: boolean;
  /**
   * Output-cache roots (`Out[n]`, `_n`, `_`, `__`, `___`) that hold CUDA
   * bytes no variable keeps (tensors, containers, models: their `sole`, or
   * bytes shared only with other output-cache entries), dropped by the
   * unrestricted plan; their bytes go in the cell's comments, one line per
   * cell. Empty for a plan limited to one model.
   */
  outputs: IRootBytes[];
  /**
   * Of `outputs`, the hidden copies that name no `Out` entry (`cells`
   * empty: `_7`, `__` left by `del Out[7]` or `%reset -f out`; or, from an
   * agent without `cells`, the slots `_`, `__`, `___`): the cell drops what
   * IPython's names of that slot hold (user_ns_hidden, the display hook,
   * for `_` the last result) and every other name of the same objects.
   */
  copies: string[];
  /**
   * Caught exceptions kept in user variables (`keptErrors` whose path is the
   * variable itself), with what the variable held (`valueId`): the
   * unrestricted plan clears the locals of their traceback's frames
   * (`traceback.clear_frames`), keeping the exception and the variable.
   * Empty for a plan limited to one model.
   */
  keptErrors?: Array<{ name: string; valueId: string }>;
}

const OUT_ENTRY = /^Out\[(\d{1,9})\]$/;
const NUMBERED = /^_(\d{1,9})$/;
const SLOTS = ['_', '__', '___'];
/** Names of the output cache: `_`, `__`, `___`, `_N`, `Out[N]`. */
const OUTPUT_NAME = /^(?:_{1,3}|_\d{1,9}|Out\[\d{1,9}\])$/;

/**
 * Whether the unrestricted plan drops an output root: it keeps CUDA bytes
 * that dropping the output cache returns — its own (`sole`), or bytes it
 * shares only with other output-cache entries. Without `sole` (an older
 * agent): CUDA bytes first attributed to it. A tensor a variable also names
 * is never planned.
 */
function dropsCuda(root: IRootBytes): boolean {
  if (root.sole === undefined) {
    return sumBytes(root.bytes, isCudaDevice) > 0;
  }
  if (sumBytes(root.sole, isCudaDevice) > 0) {
    return true;
  }
  const others = root.sharedWith ?? [];
  return (
    sumBytes(root.shared ?? {}, isCudaDevice) > 0 &&
    others.length > 0 &&
    others.every(n => OUTPUT_NAME.test(n))
  );
}
/** What the models of an inventory put in a plan. */
interface IModelsPlan {
  /** Output-cache execution counts of the entries that hold the planned models. */
  outKeys: Set<number>;
  staleModels: IModelInfo[];
  /** Stale models it may not free, and the holders it leaves. */
  held: Array<{ label: string; by: string[] }>;
  /** User variables (identifiers) that hold models and are kept. */
  kept: Set<string>;
  clearTraceback: boolean;
}

/**
 * Plan the models: the stale ones (with `modelId`, that one only; with
 * `deleteNames` too, it counts as stale), the output-cache entries that
 * hold them, whether the traceback holds one, and the variables kept.
 */
function planModels(
  inventory: IInventory | null,
  modelId: string | null,
  deleteNames: ReadonlyArray<string>
): IModelsPlan {
  const plan: IModelsPlan = {
    outKeys: new Set<number>(),
    staleModels: [],
    held: [],
    kept: new Set<string>(),
    clearTraceback: modelId === null
  };
  for (const model of inventory?.models ?? []) {
    const target = modelId === null || model.id === modelId;
    const stale =
      model.stale || (target && modelId !== null && deleteNames.length > 0);
    if (target && stale) {
      const left = cleanLeaves(model, inventory, deleteNames);
      if (left.length) {
        plan.held.push({ label: model.label || model.className, by: left });
      } else {
        plan.staleModels.push(model);
      }
      if (model.holders.some(h => h.kind === 'traceback')) {
        plan.clearTraceback = true;
      }
    }
    for (const holder of model.holders) {
      if (holder.kind === 'variable') {
        if (
          isPythonIdentifier(holder.name) &&
          !deleteNames.includes(holder.name)
        ) {
          plan.kept.add(holder.name);
        }
        continue;
      }
      if (holder.kind !== 'output' || !stale || !target) {
        continue;
      }
      const match = OUT_ENTRY.exec(holder.name) ?? NUMBERED.exec(holder.name);
      if (match) {
        plan.outKeys.add(Number(match[1]));
      }
    }
  }
  return plan;
}

/**
 * Plan the output-cache entries that hold CUDA memory no variable reaches
 * (the unrestricted plan only): their tensors (or containers of tensors) go
 * with the cache entry; a user variable is never touched. Their execution
 * counts are added to `outKeys`.
 *
 * @returns the roots planned and the hidden copies among them (no `Out`
 *   entry names them).
 */
function planOutputs(
  inventory: IInventory | null,
  outKeys: Set<number>
): { outputs: IRootBytes[]; copies: Set<string> } {
  const outputs: IRootBytes[] = [];
  const copies = new Set<string>();
  for (const root of inventory?.roots ?? []) {
    if (root.kind !== 'output' || !dropsCuda(root)) {
      continue;
    }
    const cells = (root.cells ?? []).filter(
      c => Number.isSafeInteger(c) && c >= 0
    );
    const match = OUT_ENTRY.exec(root.name) ?? NUMBERED.exec(root.name);
    if (cells.length) {
      cells.forEach(c => outKeys.add(c));
    } else if (root.cells === undefined && match) {
      outKeys.add(Number(match[1]));
    } else if (SLOTS.includes(root.name) || NUMBERED.test(root.name)) {
      copies.add(root.name); // a hidden copy: no Out entry names it
    } else {
      continue;
    }
    outputs.push(root);
  }
  return { outputs, copies };
}

/**
 * Work out the clean plan for an inventory (or an empty plan without one:
 * the cell then still clears the last traceback, collects and empties the cache).
 *
 * @param options - limit the plan to one model, and delete the variables
 *   that name it; without options every stale model is planned.
 */
export function planClean(
  inventory: IInventory | null,
  options: IPlanOptions = {}
): ICleanPlan {
  const modelId = options.modelId ?? null;
  const deleteNames =
    modelId === null
      ? []
      : [...new Set(options.deleteNames ?? [])]
          .filter(isPythonIdentifier)
          .sort();
  const models = planModels(inventory, modelId, deleteNames);
  const deleteIds: Record<string, string> = {};
  for (const model of inventory?.models ?? []) {
    for (const holder of model.id === modelId ? model.holders : []) {
      const id = holder.valueId;
      if (holder.kind === 'variable' && id && /^0x[0-9a-f]{1,16}$/.test(id)) {
        deleteIds[holder.name] = id;
      }
    }
  }
  const { outputs, copies } =
    modelId === null
      ? planOutputs(inventory, models.outKeys)
      : { outputs: [], copies: new Set<string>() };
  return {
    outKeys: [...models.outKeys].sort((a, b) => a - b),
    staleModels: models.staleModels,
    keptNames: [...models.kept].sort(),
    ...(models.held.length ? { heldModels: models.held } : {}),
    staleBytes: models.staleModels.reduce(
      (sum, m) => sum + sumBytes(m.bytes),
      0
    ),
    modelId,
    deleteNames,
    deleteIds,
    clearTraceback: models.clearTraceback,
    outputs,
    copies: [...copies].sort(copyOrder),
    keptErrors:
      modelId === null
        ? (inventory?.keptErrors ?? [])
            .filter(
              e =>
                e.path === e.name &&
                isPythonIdentifier(e.name) &&
                /^0x[0-9a-f]{1,16}$/.test(e.valueId ?? '')
            )
            .map(e => ({ name: e.name, valueId: e.valueId as string }))
        : []
  };
}

/** `_`, `__`, `___` first, then `_N` by N. */
function copyOrder(a: string, b: string): number {
  const rank = (n: string) =>
    SLOTS.includes(n) ? n.length - 4 : Number(n.slice(1));
  return rank(a) - rank(b);
}

/** Width of every line of the cell (PEP 8's 79 columns). */
const WIDTH = 79;
/** Most lines of a generated cell (the plans' code leaves the rest to comments). */
export const MAX_CELL_LINES = 25;
/** Most lines of the description after the "Inserted by" line. */
const MAX_DESCRIPTION = 3;

function describeStale(model: IModelInfo): string {
  const held = holderNames(model).join(', ');
  return commentSafe(
    `${model.label}, ${formatBytes(sumBytes(model.bytes))} (${held || 'nothing named'})`,
    100
  );
}

/** Per device, the largest figure (the names of one object keep the same storages). */
function largest(list: ReadonlyArray<Record<string, number>>) {
  const out: Record<string, number> = {};
  for (const bytes of list) {
    for (const [device, value] of Object.entries(bytes)) {
      out[device] = Math.max(out[device] ?? 0, value);
    }
  }
  return out;
}

/**
 * What the output cache frees: the planned cells and hidden copies, then
 * their bytes (per root its own, `sole`; per cell the largest of its names)
 * and tensors — `cells [3], [4], hidden copy _2: 12.0 MiB on cuda:0, 4
 * tensors` — and the same in short (`the output cache's 12.0 MiB on
 * cuda:0`); none without outputs.
 */
function describeOutputs(outputs: ReadonlyArray<IRootBytes>): string[] {
  const groups = new Map<string, IRootBytes[]>();
  const cells = new Set<number>();
  const hidden: string[] = [];
  const recent: string[] = [];
  for (const root of outputs) {
    const legacy = root.cells === undefined;
    const match = OUT_ENTRY.exec(root.name) ?? NUMBERED.exec(root.name);
    const of = root.cells?.length
      ? root.cells
      : legacy && match
        ? [Number(match[1])]
        : [];
    of.forEach(c => cells.add(c));
    if (!of.length) {
      (legacy ? recent : hidden).push(root.name);
    }
    const key = of.length ? of.join(',') : root.name;
    groups.set(key, [...(groups.get(key) ?? []), root]);
  }
  if (!groups.size) {
    return [];
  }
  const total: Record<string, number> = {};
  let tensors = 0;
  for (const roots of groups.values()) {
    const bytes = largest(roots.map(r => r.sole ?? r.bytes));
    for (const [device, value] of Object.entries(bytes)) {
      total[device] = (total[device] ?? 0) + value;
    }
    tensors += Math.max(...roots.map(r => r.tensors));
  }
  const sorted = [...cells].sort((a, b) => a - b).map(c => `[${c}]`);
  const where = [
    ...(sorted.length
      ? [`${sorted.length > 1 ? 'cells' : 'cell'} ${someNames(sorted, 30)}`]
      : []),
    ...(hidden.length
      ? [
          `hidden ${hidden.length > 1 ? 'copies' : 'copy'} ${someNames(hidden, 20)}`
        ]
      : []),
    ...(recent.length ? [`a recent cell's ${someNames(recent, 20)}`] : [])
  ];
  const what = outputs.some(r => r.models) ? 'models, ' : '';
  const count = tensors
    ? `, ${what}${tensors} ${tensors === 1 ? 'tensor' : 'tensors'}`
    : '';
  return [
    commentSafe(`${where.join(', ')}: ${formatPlacement(total)}${count}`, 160),
    `the output cache's ${formatPlacement(total)}`
  ];
}

/** `code`, with `  # comment` when that fits in {@link WIDTH} columns. */
function withComment(code: string, comment: string): string {
  const line = `${code}  # ${comment}`;
  return line.length <= WIDTH ? line : code;
}

/** Holds a figure and its unit together while wrapping (never in the output). */
const UNIT_GLUE = '\u0000';

/**
 * `text` as `# ` comment lines of at most {@link WIDTH} columns, words (and
 * a figure with its unit) kept whole; a longer word is cut with an ellipsis.
 */
function wrapComment(text: string): string[] {
  const lines: string[] = [];
  let line = '#';
  const safe = commentSafe(text, 2000).replace(
    /(\d) (B|KiB|MiB|GiB|TiB)\b/g,
    `$1${UNIT_GLUE}$2`
  );
  for (const word of safe.split(' ').filter(Boolean)) {
    if (line.length + 1 + word.length > WIDTH && line !== '#') {
      lines.push(line);
      line = '#';
    }
    line += ` ${word.split(UNIT_GLUE).join(' ')}`;
  }
  return [...lines, line].map(l => commentSafe(l, WIDTH));
}

/** `names` joined, cut to about `room` characters with "+N more". */
function someNames(names: ReadonlyArray<string>, room = 40): string {
  if (!names.length) {
    return 'none';
  }
  let shown = names.length;
  while (shown > 1 && names.slice(0, shown).join(', ').length > room) {
    shown--;
  }
  const rest = names.length - shown;
  return `${names.slice(0, shown).join(', ')}${rest ? ` +${rest} more` : ''}`;
}

/**
 * The description: what the cell drops and keeps, then what it frees, as
 * dense comment lines, at most `budget`. What does not fit is shortened:
 * the first stale models and "+N more", then the stale models as one count,
 * then the output cache in short, then the head alone.
 */
function describe(
  head: string,
  stale: ReadonlyArray<IModelInfo>,
  outputs: ReadonlyArray<IRootBytes>,
  budget: number,
  nothing = ' Output cache: nothing to drop.'
): string[] {
  if (budget <= 0) {
    return [];
  }
  const models = stale.map(describeStale);
  const [cache, short] = describeOutputs(outputs);
  const outs = cache === undefined ? [] : [cache];
  const candidates: string[][] = [];
  for (let shown = models.length; shown >= 1; shown--) {
    const rest = models.length - shown;
    candidates.push([
      ...models.slice(0, shown),
      ...(rest ? [`+${rest} more stale`] : []),
      ...outs
    ]);
  }
  const bytes = stale.reduce((sum, m) => sum + sumBytes(m.bytes), 0);
  const count = models.length
    ? [
        `${models.length} stale model${models.length > 1 ? 's' : ''}, ${formatBytes(bytes)}`
      ]
    : [];
  candidates.push(
    [...count, ...outs],
    [...count, ...(short === undefined ? [] : [short])]
  );
  for (const items of candidates) {
    const text = items.length
      ? `${head} Frees ${items.join('; ')}.`
      : `${head}${nothing}`;
    const lines = wrapComment(text);
    if (lines.length <= budget) {
      return lines;
    }
  }
  const lines = wrapComment(head);
  return lines.length <= budget
    ? lines
    : [
        ...lines.slice(0, budget - 1),
        commentSafe(`${lines[budget - 1]} …`, WIDTH)
      ];
}

/**
 * Tuple items as Python source: numbers, runs of four or more consecutive
 * numbers as `*range(a, b)`; a one-item tuple gets its comma.
 */
function pyKeys(keys: ReadonlyArray<number>): string[] {
  const items: string[] = [];
  for (let i = 0; i < keys.length;) {
    let j = i;
    while (j + 1 < keys.length && keys[j + 1] === keys[j] + 1) {
      j++;
    }
    if (j - i >= 3) {
      items.push(`*range(${keys[i]}, ${keys[j] + 1})`);
      i = j + 1;
    } else {
      items.push(String(keys[i]));
      i++;
    }
  }
  return items;
}

/**
 * A string literal of an already-safe name, as adjacent literals of at most
 * 60 characters each (Python joins them), so that no line gets too long.
 */
function pyString(text: string): string[] {
  const parts: string[] = [];
  for (let i = 0; i < text.length || !parts.length; i += 60) {
    parts.push(`"${text.slice(i, i + 60)}"`);
  }
  return parts;
}

/**
 * `("name", 0x7f…)`: a variable to delete and the id of what it held when
 * the finding was built (`None` without one: an older agent), as literal
 * parts for {@link signature}.
 */
function pyPair(name: string, id: string): string[] {
  const parts = pyString(name);
  parts[0] = `(${parts[0]}`;
  parts[parts.length - 1] += ',';
  return [...parts, `${id})`];
}

/**
 * The `def` line with its parameters, wrapped between tuple items at
 * {@link WIDTH} columns (8-space continuation indent).
 */
function signature(params: Array<[string, string[][]]>): string[] {
  // tokens: each is written whole; `glue` goes between it and the next one
  // the binding of yours that `def` replaces, kept to be given back (generateCleanCell)
  const tokens: string[] = [
    `def ${HELPER}(was=globals().get("${HELPER}", ...),`,
    `me="${HELPER}",`
  ];
  params.forEach(([name, items], p) => {
    // a one-item tuple needs its comma, also after adjacent literals
    const comma = items.length === 1 ? ',' : '';
    const flat = items.map((parts, i) =>
      parts.map((part, k) => {
        const last = k === parts.length - 1;
        const sep = i === items.length - 1 ? comma : ',';
        return `${i === 0 && k === 0 ? `${name}=(` : ''}${part}${last ? sep : ''}`;
      })
    );
    const words = flat.flat();
    if (!words.length) {
      words.push(`${name}=(`);
    }
    words[words.length - 1] += `)${p === params.length - 1 ? '):' : ','}`;
    tokens.push(...words);
  });
  const lines: string[] = [];
  let line = '';
  for (const token of tokens) {
    const glue = line === '' || line.endsWith('(') ? '' : ' ';
    if (line !== '' && (line + glue + token).length > WIDTH) {
      lines.push(line);
      line = `        ${token}`;
    } else {
      line += glue + token;
    }
  }
  return [...lines, line];
}

/** The function the clean cell defines, calls, and unbinds (or gives back). */
const HELPER = '_gpu_hygiene_clear_gpu';

/** `hex(id())` of an object, as the agent writes it: the only ids that reach code. */
const VALUE_ID = /^0x[0-9a-f]{1,16}$/;

/** `value` quoted for an error message, cut to 60 characters. */
function quoted(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}

/**
 * Check every identifier and key of `plan` that the clean cell writes as
 * code or names in its comments, whoever built the plan ({@link planClean}
 * filters what it takes from the kernel; a plan made by hand is not): the
 * execution counts (`outKeys`, `outputs[].cells`: non-negative safe
 * integers), the hidden copies (`_`, `__`, `___`, `_N`), the names
 * (`deleteNames`, `keptNames`, `keptErrors[].name`: Python identifiers) and
 * the ids (`deleteIds`' values, `keptErrors[].valueId`: `0x` and hex).
 *
 * @throws Error naming the first field that fails and its value (quoted,
 *   cut to 60 characters); nothing of such a plan reaches code.
 */
export function checkCleanPlan(plan: ICleanPlan): void {
  const refuse = (field: string, value: unknown, rule: string): never => {
    throw new Error(
      `generateCleanCell: refused plan: ${field} ${quoted(value)} is not ${rule}`
    );
  };
  const count = (field: string, value: unknown) => {
    if (
      typeof value !== 'number' ||
      !Number.isSafeInteger(value) ||
      value < 0
    ) {
      refuse(field, value, 'an execution count');
    }
  };
  const identifier = (field: string, value: unknown) => {
    if (typeof value !== 'string' || !isPythonIdentifier(value)) {
      refuse(field, value, 'a Python identifier');
    }
  };
  const address = (field: string, value: unknown) => {
    if (typeof value !== 'string' || !VALUE_ID.test(value)) {
      refuse(field, value, 'an object id (hex(id()))');
    }
  };
  const list = (field: string, value: unknown): unknown[] => {
    if (!Array.isArray(value)) {
      refuse(field, value, 'a list');
    }
    return value as unknown[];
  };
  list('outKeys', plan.outKeys).forEach((k, i) => count(`outKeys[${i}]`, k));
  list('deleteNames', plan.deleteNames).forEach((n, i) =>
    identifier(`deleteNames[${i}]`, n)
  );
  list('keptNames', plan.keptNames).forEach((n, i) =>
    identifier(`keptNames[${i}]`, n)
  );
  list('copies', plan.copies ?? []).forEach((c, i) => {
    if (typeof c !== 'string' || !(SLOTS.includes(c) || NUMBERED.test(c))) {
      refuse(`copies[${i}]`, c, 'an output-cache name (_, __, ___, _N)');
    }
  });
  const ids = plan.deleteIds ?? {};
  if (typeof ids !== 'object' || ids === null || Array.isArray(ids)) {
    refuse('deleteIds', ids, 'a record of names and ids');
  }
  for (const [name, id] of Object.entries(ids)) {
    address(`deleteIds[${quoted(name)}]`, id);
  }
  list('keptErrors', plan.keptErrors ?? []).forEach((e, i) => {
    const error = (e ?? {}) as { name?: unknown; valueId?: unknown };
    identifier(`keptErrors[${i}].name`, error.name);
    address(`keptErrors[${i}].valueId`, error.valueId);
  });
  list('outputs', plan.outputs ?? []).forEach((r, i) =>
    list(`outputs[${i}].cells`, (r as IRootBytes).cells ?? []).forEach((c, j) =>
      count(`outputs[${i}].cells[${j}]`, c)
    )
  );
}

/**
 * Generate the clear_gpu cell: at most {@link MAX_CELL_LINES} lines, every
 * line within 79 columns (PEP 8). The code comes first (17 to 21 lines, by
 * plan); the description gets the lines it leaves, at most three after the
 * "Inserted by" line, and shortens itself to fit (see `describe`). Only a
 * plan with more than about 20 scattered output cells (a run of consecutive
 * cells is one `*range(a, b)`) wraps its signature past what the
 * description gives up, a line per about 14 more cells.
 *
 * What it drops, whatever the IPython version: the variables the user chose
 * (`names`), for each planned cell `Out[N]` (IPython's `output_hist`), for
 * each hidden copy what IPython's names of that slot hold (`user_ns_hidden`,
 * the display hook's `_`, `__`, `___`, for `_` the last result); then every
 * name IPython gave those very objects — `_`, `__`, `___`, `_N` in
 * `user_ns` (only while `user_ns_hidden` holds the same object there: never
 * a user's own variable), in `user_ns_hidden` and the display hook: the
 * slots become `""` (as IPython resets them), `_N` go. It lets go of the
 * previous cell's `ExecutionResult` (its result and error, which IPython
 * drops when this cell ends anyway) before collecting; the unrestricted plan
 * (or one whose model the last traceback holds) also clears the last
 * exception: the failed frames' locals (`traceback.clear_frames`), the
 * `sys.last_*` names and IPython's `InteractiveTB.tb`. Then `gc.collect()`
 * and, if CUDA is initialised, `torch.cuda.empty_cache()`.
 *
 * It keeps only the ids of what it drops, never the objects, so each is
 * freed as its last name goes (an id can only match an object alive with
 * it: the cell stores nothing but `""` in those namespaces). A missing entry
 * or an empty slot adds the id of `None` or `""`: that only ever resets
 * IPython's own empty names (an empty-string output's `_N` goes too). Every
 * lookup has a default (`pop(k, None)`, `getattr(…, None)`), so re-running
 * the cell, or running it after the names are gone, raises nothing.
 *
 * @param plan - from {@link planClean}, or any plan: every identifier and
 *   key is checked again ({@link checkCleanPlan}).
 * @returns Python source; the first line is {@link CLEAN_MARKER}, which the
 *   agent uses to report `cleaned`.
 * @throws Error when a name, id or execution count of `plan` could not be
 *   written as what it stands for ({@link checkCleanPlan}).
 */
export function generateCleanCell(plan: ICleanPlan): string {
  checkCleanPlan(plan);
  const outputs = plan.outputs ?? [];
  const copies = plan.copies ?? [];
  const names = plan.deleteNames;
  // own keys only: a variable named `constructor` has no id from Object.prototype
  const ids = new Map(Object.entries(plan.deleteIds ?? {}));
  // identity-checked when the agent said what each name held (agent 0.8.0), else as before
  const checked = names.every(n => ids.has(n));
  const errors = plan.keptErrors ?? [];
  const tb = plan.clearTraceback || errors.length > 0;
  const params: Array<[string, string[][]]> = [
    ['out_keys', pyKeys(plan.outKeys).map(k => [k])],
    ...(copies.length
      ? [['copies', copies.map(pyString)] as [string, string[][]]]
      : []),
    ...(names.length
      ? [
          [
            'names',
            names.map(n => (checked ? pyPair(n, ids.get(n)!) : pyString(n)))
          ] as [string, string[][]]
        ]
      : []),
    ...(errors.length
      ? [
          ['errors', errors.map(e => pyPair(e.name, e.valueId))] as [
            string,
            string[][]
          ]
        ]
      : [])
  ];
  const pops =
    '{id(ip.history_manager.output_hist.pop(k, None)) for k in out_keys}';
  const code = [
    ...signature(params),
    '    globals().pop(me) if was is ... else globals().update({me: was})  # yours',
    `    import gc, re, sys${tb ? ', traceback' : ''}`,
    '    ip = sys.modules["IPython"].get_ipython()  # even if the name was rebound',
    '    ns, hid, dh = ip.user_ns, ip.user_ns_hidden, vars(ip.displayhook)',
    `    old = ${pops}`,
    ...(names.length
      ? [
          ...(checked
            ? [
                '    [print(f"# {n} changed: kept") for n, i in names if id(ns.get(n)) != i]',
                '    old |= {id(ns.pop(n, None)) for n, i in names if id(ns.get(n)) == i}'
              ]
            : [
                '    old |= {id(ns.pop(n, None)) for n in names}  # the variables you chose'
              ])
        ]
      : []),
    ...(copies.length
      ? [
          '    res = getattr(ip.last_execution_result, "result", None)  # shown as _',
          '    old |= {id(s.get(c)) for c in copies for s in (hid, dh, {"_": res})}'
        ]
      : []),
    "    for s, t in ((ns, hid), (hid, hid), (dh, dh)):  # IPython's names only",
    '        for n in [n for n in list(s) if type(n) is str and t.get(n) is s[n]]:',
    '            if re.fullmatch(r"_{1,3}|_\\d+", n) and id(s[n]) in old:  # by id',
    '                s.pop(n) if n.strip("_") else s.update({n: ""})  # as IPython',
    withComment(
      `    ${tb ? 'ip.InteractiveTB.tb = ' : ''}ip.last_execution_result = ${copies.length ? 'res = ' : ''}None`,
      "the previous cell's"
    ),
    ...(plan.clearTraceback
      ? [
          '    traceback.clear_frames(getattr(sys, "last_traceback", None))  # its locals',
          '    sys.last_type = sys.last_value = sys.last_traceback = sys.last_exc = None'
        ]
      : []),
    ...(errors.length
      ? [
          '    for e in [ns.get(n) for n, i in errors if id(ns.get(n)) == i]:  # kept',
          '        traceback.clear_frames(e.__traceback__)  # their locals, not e'
        ]
      : []),
    "    gc.collect()  # reference cycles; then PyTorch's cache back to the driver",
    '    if sys.modules.get("torch") and sys.modules["torch"].cuda.is_initialized():',
    '        sys.modules["torch"].cuda.empty_cache()',
    `${HELPER}()`
  ];
  const kept = someNames(plan.keptNames);
  const held = (plan.heldModels ?? []).map(
    m => `${m.label} (${someNames(m.by, 30)})`
  );
  // a stale model whose holder the cell leaves alone: never in "Frees"
  const mayStay = held.length
    ? ` May not free ${someNames(held, 60)}: not IPython's own.`
    : '';
  const head = names.length
    ? `Deletes what you chose (${someNames(names)}), then the output-cache entries of that model; kept: ${kept}.`
    : plan.modelId !== null
      ? `Drops only what keeps one stale model alive; still named, so kept: ${kept}.`
      : `Drops stale references only; still named, so kept: ${kept}.${
          errors.length
            ? ` Clears the frames of the caught errors you keep (${someNames(errors.map(e => e.name))}).`
            : ''
        }`;
  const budget = Math.min(MAX_DESCRIPTION, MAX_CELL_LINES - 2 - code.length);
  return [
    CLEAN_MARKER,
    '# Inserted by jupyterlab-gpu-hygiene; safe to re-run, also without it.',
    ...describe(
      `${head}${mayStay}`,
      plan.staleModels,
      outputs,
      budget,
      mayStay ? '' : undefined
    ),
    ...code,
    ''
  ].join('\n');
}
