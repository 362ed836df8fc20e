/**
 * The toasts' texts, side by side (pure functions of the findings). Each fits
 * JupyterLab's 140-character toast ({@link MAX_TOAST}) by shortening a list of
 * names or a path first, and ends with "…" only as a last resort. The OOM
 * toast's text is `describeOom` in `analysis/oom/oom-diagnosis.ts`, next to the
 * diagnosis it summarises.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import {
  formatBytes,
  formatPlacement,
  formatTimeLeft,
  fitText,
  listNames,
  MAX_TOAST,
  shortenMiddle,
  sumBytes
} from '../analysis/format';
import type { IGraphRow } from '../analysis/memory/graph-holders';
import { namesModel } from '../analysis/findings/user-models';
import type { IFinding } from '../analysis/findings/types';
import { holderNames, IStackedGroup } from '../analysis/memory/stacking';
import type { IProjection } from '../analysis/memory/projection';
import type { ILeakTrend } from '../analysis/memory/leak-trend';
import type { IAllocator, ICleaned, IModelInfo } from '../protocol';

/** How the stacking text names a model's kind: YOLO for Ultralytics, else its class. */
function familyName(model: IModelInfo): string {
  return model.family === 'ultralytics' ? 'YOLO' : model.className;
}

/**
 * How much of each name a stacking text shows, from most to least: the whole
 * label ("BertModel (bert-base-uncased)") with up to 6 then 3 holder names, the
 * kind alone ("BertModel") with 6, 3, then without the newer instance's size,
 * one name, and last the kind cut in the middle ("Qwen2_5_VLFo…Generation"):
 * holder names, which say what to free, go after the checkpoints.
 */
const STACKING_LEVELS: ReadonlyArray<{
  labels: 'full' | 'kind' | 'short';
  maxNames: number;
  placement: boolean;
  /** Longest model kind or holder name at level 'short'. */
  room?: number;
}> = [
  { labels: 'full', maxNames: 6, placement: true },
  { labels: 'full', maxNames: 3, placement: true },
  { labels: 'kind', maxNames: 6, placement: true },
  { labels: 'kind', maxNames: 3, placement: true },
  { labels: 'kind', maxNames: 3, placement: false },
  { labels: 'kind', maxNames: 1, placement: false },
  { labels: 'short', maxNames: 1, placement: false, room: 24 }
];

/**
 * Text of the stacking toast for one group: names the older instance it
 * tells, its size and what holds it, and the newer one. A stale one is
 * "older YOLO (yolov8n.yaml), 12.1 MiB, held only by Out[2], _2, __"; one a
 * variable still names is "m still holds YOLO (yolov8n.yaml), 12.1 MiB".
 * Kept under JupyterLab's 140-character toast limit by showing fewer holder
 * names, then the models' kinds without their checkpoints, then without the
 * newer one's size ({@link STACKING_LEVELS}), then a shorter sentence naming
 * the kind once with whole names, and only then names cut in the middle;
 * the details are in the VRAM panel the toast links to.
 *
 * @param moreGroups - how many other groups are stacked (told in words).
 * @param older - the older instance to tell (default: the newest older one).
 */
export function describeStacking(
  group: IStackedGroup,
  trans: TranslationBundle,
  moreGroups = 0,
  older: IModelInfo = group.older[group.older.length - 1]
): string {
  const newest = group.newest;
  const variables = older.stale
    ? []
    : [
        ...new Set(
          holderNames({
            ...older,
            holders: older.holders.filter(namesModel)
          })
        )
      ];
  const holders = holderNames({
    ...older,
    holders: older.holders.filter(h => h.kind !== 'hidden')
  });
  const olderCount =
    group.older.length > 1
      ? trans._n(
          ' (and %1 older one)',
          ' (and %1 older ones)',
          group.older.length - 1
        )
      : '';
  const more = moreGroups
    ? trans._n(
        ' %1 other model is stacked too.',
        ' %1 other models are stacked too.',
        moreGroups
      )
    : '';
  const compose = ({
    labels,
    maxNames,
    placement,
    room = Infinity
  }: (typeof STACKING_LEVELS)[number]): string => {
    const cut = (text: string) => shortenMiddle(text, room);
    const label = (model: IModelInfo) =>
      labels === 'full' ? model.label : cut(familyName(model));
    const names = (list: string[]) => listNames(list.map(cut), maxNames, trans);
    const newer = placement
      ? trans.__('%1, %2', label(newest), formatPlacement(newest.bytes, trans))
      : label(newest);
    const kind = cut(familyName(newest));
    if (variables.length) {
      return trans.__(
        'Stacked %1: %2 still holds %3, %4%5; newer %6.%7',
        kind,
        names(variables),
        label(older),
        formatBytes(sumBytes(older.bytes)),
        olderCount,
        newer,
        more
      );
    }
    const held = holders.length
      ? older.stale
        ? trans.__('held only by %1', names(holders))
        : trans.__('still named by %1', names(holders))
      : trans.__('held by nothing named (reference cycle)');
    return trans.__(
      'Stacked %1: older %2, %3, %4%5; newer %6.%7',
      kind,
      label(older),
      formatBytes(sumBytes(older.bytes)),
      held,
      olderCount,
      newer,
      more
    );
  };
  // The shortest: the kind once, one name, the rest behind the panel link;
  // whole names first, then cut in the middle to `room`.
  const tightest = (room: number): string => {
    const kind = shortenMiddle(familyName(newest), room);
    const bytes = formatBytes(sumBytes(older.bytes));
    const first = (list: string[]) => shortenMiddle(list[0], room);
    return variables.length
      ? trans.__(
          'Stacked %1: %2 still holds an older one, %3%4.%5',
          kind,
          first(variables),
          bytes,
          olderCount,
          more
        )
      : holders.length
        ? trans.__(
            'Stacked %1: an older one, %2, is held by %3%4.%5',
            kind,
            bytes,
            first(holders),
            olderCount,
            more
          )
        : trans.__(
            'Stacked %1: an older one, %2, is held by nothing named%3.%4',
            kind,
            bytes,
            olderCount,
            more
          );
  };
  // whole names in a shorter sentence before any name is cut
  const whole = STACKING_LEVELS.filter(level => level.labels !== 'short');
  const cut = STACKING_LEVELS.filter(level => level.labels === 'short');
  return fitText([
    ...whole.map(compose),
    tightest(Infinity),
    ...cut.map(compose),
    tightest(14)
  ]);
}

/** What the leak text knows besides the trend. */
export interface ILeakContext {
  /**
   * The running cell's execution count, when the trend's own is null (the
   * cell still runs): the kernel's next count; null gives `[*]`.
   */
  cell?: number | null;
  /** When the climb fills the GPU ({@link projectFull}); its time is said while the cell runs. */
  projection?: IProjection | null;
}

/**
 * Text of the leak-trend warning, e.g. "PyTorch allocated climbs ~12.0 MiB
 * per cell over 8 cells. Tensors kept alive? e.g. losses.append(loss), not
 * loss.item()", or inside a running cell "PyTorch allocated climbs ~7.9 GiB
 * per minute in cell [12]; at this rate the GPU is full in ~17 min. Tensors
 * kept alive? e.g. losses.append(loss)" (no time when the GPU would not fill
 * within {@link PROJECTION_HORIZON_S}); once the cell ended "PyTorch
 * allocated climbed ~7.9 GiB per minute in cell [12]." and what holds the
 * growth. Kept under 140 characters: the hint shortens first.
 *
 * @param devices - how many devices the kernel sees (the device is named when several).
 * @param holder - what the inventory names as holding the growth ({@link leakHolder}).
 */
export function describeLeak(
  trend: ILeakTrend,
  trans: TranslationBundle,
  devices = 1,
  holder: Pick<IFinding, 'kind' | 'subject'> | null = null,
  context: ILeakContext = {}
): string {
  const where = devices > 1 ? trans.__(' on cuda:%1', trend.device) : '';
  const hints = holder
    ? [leakHint(holder, trans)]
    : [
        trans.__(
          'Tensors kept alive? e.g. losses.append(loss), not loss.item()'
        ),
        trans.__('Tensors kept alive? e.g. losses.append(loss)'),
        trans.__('Tensors kept alive?')
      ];
  let text: string;
  if (trend.basis === 'cells') {
    text = trans.__(
      'PyTorch allocated climbs ~%1 per cell over %2 cells%3.',
      formatBytes(trend.rate),
      trend.points,
      where
    );
  } else {
    const count = trend.executionCount ?? context.cell ?? null;
    const cell = count === null ? '[*]' : `[${count}]`;
    const rate = formatBytes(trend.rate);
    const seconds = context.projection?.seconds ?? null;
    if (trend.executionCount !== null) {
      text = trans.__(
        'PyTorch allocated climbed ~%1 per minute in cell %2%3.',
        rate,
        cell,
        where
      );
    } else if (seconds === null) {
      text = trans.__(
        'PyTorch allocated climbs ~%1 per minute in cell %2%3.',
        rate,
        cell,
        where
      );
    } else if (context.projection?.bound === 'limit') {
      text = trans.__(
        'PyTorch allocated climbs ~%1 per minute in cell %2%3; at this rate it reaches its allocator cap in ~%4.',
        rate,
        cell,
        where,
        formatTimeLeft(seconds)
      );
    } else {
      text = trans.__(
        'PyTorch allocated climbs ~%1 per minute in cell %2%3; at this rate the GPU is full in ~%4.',
        rate,
        cell,
        where,
        formatTimeLeft(seconds)
      );
    }
  }
  for (const hint of hints) {
    if (text.length + 1 + hint.length <= MAX_TOAST) {
      return `${text} ${hint}`;
    }
  }
  return text.length <= MAX_TOAST ? text : `${text.slice(0, MAX_TOAST - 1)}…`;
}

/**
 * The leak toast's hint when the inventory names what holds the growth
 * ({@link leakHolder}): the holder and its fix, in a few words.
 */
function leakHint(
  holder: Pick<IFinding, 'kind' | 'subject'>,
  trans: TranslationBundle
): string {
  const subject = shortenMiddle(holder.subject, 40);
  switch (holder.kind) {
    case 'output-tensors':
      return trans.__(
        'Held by the output cache (%1): Clean GPU drops it.',
        subject
      );
    case 'graph-holder':
      return trans.__('%1 keeps autograd graphs: store loss.item().', subject);
    case 'traceback-tensors':
      return trans.__('Held by the last traceback: Clean GPU clears it.');
    default:
      return trans.__('Held by %1.', subject);
  }
}

/**
 * Text of the graph-holder warning, e.g. "val_losses keeps 4 autograd graphs
 * alive (~1.0 GiB on cuda:0): store loss.item() or loss.detach(), or run
 * evaluation under torch.no_grad()." Kept under 140 characters by shortening
 * the variable's path.
 */
export function describeGraphHolder(
  row: IGraphRow,
  trans: TranslationBundle
): string {
  const { graph } = row;
  const args = (path: string) =>
    [
      graph.count,
      path,
      graph.truncated ? '≥' : '~',
      formatBytes(row.device === null ? row.bytes : row.deviceBytes),
      row.device ?? 'cpu'
    ] as const;
  const compose = (path: string) =>
    trans._n(
      '%2 keeps %1 autograd graph alive (%3%4 on %5): store loss.item() or loss.detach(), or run evaluation under torch.no_grad().',
      '%2 keeps %1 autograd graphs alive (%3%4 on %5): store loss.item() or loss.detach(), or run evaluation under torch.no_grad().',
      ...args(path)
    );
  // Too long: the advice shortens before the holder's name does (a cut name
  // could read as another variable: `val_loss…` for `val_losses`).
  const short = (path: string) =>
    trans._n(
      '%2 keeps %1 autograd graph alive (%3%4 on %5): store loss.item() or loss.detach().',
      '%2 keeps %1 autograd graphs alive (%3%4 on %5): store loss.item() or loss.detach().',
      ...args(path)
    );
  for (const text of [compose(graph.path), short(graph.path)]) {
    if (text.length <= MAX_TOAST) {
      return text;
    }
  }
  // the path cut in the middle keeps its variable and its last key readable
  return fitText([
    short(shortenMiddle(graph.path, MAX_TOAST - short('').length))
  ]);
}

/**
 * Text of the info toast after a clean cell. When models freed nothing but
 * CUDA is measured, it says what happened instead of only "freed 0 B": what
 * `empty_cache()` returned (reserved before − after), what stays fragmented
 * (`inactiveSplit` of the clean cell's `allocator` fact, unless expandable
 * segments are on) and what live tensors still hold (allocated after), e.g.
 * "Clean GPU freed 0 B of models (2 → 2 live); returned 1.0 GiB of
 * PyTorch's cache; 96.0 MiB stays fragmented, 2.0 GiB in live tensors."
 * Where the two counts seem to contradict, it says why, when it fits: fewer
 * live models but 0 B freed (their tensors stay, held by another name), or
 * more live models after than before (a model's part, an EMA copy, counted
 * on its own once its owner went).
 *
 * @param models - live models before and after, as the user counts them
 *   (see `cleanedCounts`); default: the agent's counts.
 * @param allocator - the allocator fact of the clean cell's inventory, if any.
 */
export function describeCleaned(
  cleaned: ICleaned,
  trans: TranslationBundle,
  models: { before: number; after: number } = cleaned.models,
  allocator: IAllocator | null = null
): string {
  const freed = sumBytes(cleaned.freed);
  const drop = (
    figures: Record<string, { before: number; after: number }> | null
  ): number | null =>
    figures
      ? Object.values(figures).reduce(
          (sum, v) => sum + Math.max(0, v.before - v.after),
          0
        )
      : null;
  const allocated = drop(cleaned.allocated);
  const reserved = drop(cleaned.reserved);
  // the two figures come from two counts (the agent's storages, the user's
  // models): where they seem to contradict, say why (issue 28, item 1)
  const why =
    models.after > models.before
      ? trans.__(
          "A model's part (a trainer's EMA copy) now counts as a model of its own."
        )
      : freed === 0 && models.after < models.before
        ? trans.__(
            'Their tensors stay: another name holds them (the VRAM panel says which).'
          )
        : '';
  const withWhy = (text: string) =>
    why && text.length + 1 + why.length <= MAX_TOAST ? `${text} ${why}` : text;
  const fragmented =
    allocator && !allocator.expandableSegments
      ? allocator.devices.reduce((sum, d) => sum + d.inactiveSplit, 0)
      : null;
  if (freed === 0 && reserved !== null && cleaned.allocated) {
    const live = Object.values(cleaned.allocated).reduce(
      (sum, v) => sum + v.after,
      0
    );
    return withWhy(
      fragmented !== null
        ? trans.__(
            "Clean GPU freed 0 B of models (%1 → %2 live); returned %3 of PyTorch's cache; %4 stays fragmented, %5 in live tensors.",
            models.before,
            models.after,
            formatBytes(reserved),
            formatBytes(fragmented),
            formatBytes(live)
          )
        : trans.__(
            "Clean GPU freed 0 B of models (%1 → %2 live); returned %3 of PyTorch's cache; %4 stays in live tensors.",
            models.before,
            models.after,
            formatBytes(reserved),
            formatBytes(live)
          )
    );
  }
  const parts = [
    withWhy(
      trans.__(
        'Clean GPU freed %1 of models (%2 → %3 live).',
        formatBytes(freed),
        models.before,
        models.after
      )
    )
  ];
  if (allocated !== null && reserved !== null) {
    parts.push(
      trans.__(
        'PyTorch allocated −%1, reserved −%2.',
        formatBytes(allocated),
        formatBytes(reserved)
      )
    );
  }
  if (fragmented !== null && fragmented >= 2 ** 20) {
    const more = trans.__('%1 stays fragmented.', formatBytes(fragmented));
    if (parts.join(' ').length + 1 + more.length <= MAX_TOAST) {
      parts.push(more);
    }
  }
  return parts.join(' ');
}

/** Fewest characters of a notebook's name worth putting before a toast. */
const MIN_NOTEBOOK_NAME = 8;

/**
 * `message` with the notebook it is about in front ("train.ipynb: …"), so
 * that a toast, and its entry in JupyterLab's notification centre long after,
 * say which notebook they are about. The name is cut in the middle to keep
 * the message within {@link MAX_TOAST} (at most 40 characters of it), and
 * left out when fewer than 8 would fit: the message is never cut for it.
 *
 * @param notebook - the notebook's file name, or null (a kernel without one).
 */
export function withNotebook(
  notebook: string | null,
  message: string,
  trans: TranslationBundle
): string {
  if (!notebook) {
    return message;
  }
  const frame = trans.__('%1: %2', '', '').length;
  const room = Math.min(40, MAX_TOAST - message.length - frame);
  if (room < MIN_NOTEBOOK_NAME) {
    return message;
  }
  // the name whole, else without its ".ipynb", else cut in the middle
  const stem = notebook.replace(/\.ipynb$/i, '');
  const name =
    notebook.length <= room
      ? notebook
      : stem.length <= room
        ? stem
        : shortenMiddle(stem, room);
  return trans.__('%1: %2', name, message);
}
