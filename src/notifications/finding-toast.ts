/**
 * Findings: one warning per (kernel, finding kind) for the warnings of
 * `src/analysis/findings/` that no other toast tells, holding at least
 * `toastMinMiB` (all devices); updated in place as the findings change and
 * dismissed when none of the kind is left. Infos and smaller findings are
 * only listed in the VRAM panel. Setting: `warnOnFindings`.
 *
 * Told elsewhere, so left out here: graph holders (`graph-toast.ts`), and the
 * older instances of a stack, stale or named (`stacked-toast.ts`).
 *
 * The button is the finding's own fix (`ToastActions.fix`); several findings
 * of one kind get Clean GPU only when Clean GPU fixes every one of them,
 * else the VRAM panel (where each has its button). Never a Clean GPU for a
 * finding it cannot fix.
 */
import { factsOf, findings, IFinding } from '../analysis/findings';
import {
  fitText,
  formatPlacement,
  MAX_TOAST,
  shortenMiddle,
  sumBytes
} from '../analysis/format';
import type { GpuKernelModel } from '../model';
import type { IGpuSettings } from '../tokens';
import {
  IRuleContext,
  IToastRule,
  RuleResult,
  STATE_TOAST_AUTO_CLOSE
} from './rule';

/** Kinds whose toast is another rule's. */
const TOLD_ELSEWHERE = new Set(['graph-holder', 'named-older-model']);

/**
 * The findings worth a toast: warnings of the kinds this rule tells, not
 * part of a stack, with at least `toastMinMiB` MiB.
 */
export function findingsToToast(
  list: ReadonlyArray<IFinding>,
  settings: Pick<IGpuSettings, 'toastMinMiB'>
): IFinding[] {
  const min = Math.max(0, settings.toastMinMiB) * 2 ** 20;
  return list.filter(
    f =>
      f.severity === 'warning' &&
      !TOLD_ELSEWHERE.has(f.kind) &&
      f.stack === undefined &&
      sumBytes(f.bytes) >= min
  );
}

/** The findings rule: the fix, Open VRAM panel, Don't warn again. */
export function findingsRule({ trans, actions }: IRuleContext): IToastRule {
  const check = (model: GpuKernelModel, settings: IGpuSettings): RuleResult => {
    if (!settings.warnOnFindings) {
      return [];
    }
    const byKind = new Map<string, IFinding[]>();
    for (const finding of findingsToToast(findings(factsOf(model)), settings)) {
      byKind.set(finding.kind, [...(byKind.get(finding.kind) ?? []), finding]);
    }
    const kernelId = model.kernelId;
    return [...byKind].map(([kind, list]) => {
      const first = list[0];
      const more =
        list.length > 1
          ? trans._n(
              ' (and %1 more in the VRAM panel)',
              ' (and %1 more in the VRAM panel)',
              list.length - 1
            )
          : '';
      // Too long (long class names, paths): the finding's subject and bytes,
      // the explanation behind the panel link, never a sentence cut short.
      const text = fitText(
        [
          (first.short ?? first.explain)(trans),
          trans.__(
            '%1 keeps %2: the VRAM panel says why and how to free it.',
            shortenMiddle(first.subject, 48),
            formatPlacement(first.bytes, trans)
          )
        ],
        MAX_TOAST - more.length
      );
      const fix =
        list.length === 1
          ? actions.fix(kernelId, first)
          : list.every(f => f.fix.kind === 'clean')
            ? actions.cleanGpu(kernelId)
            : null;
      return {
        key: kind,
        type: 'warning' as const,
        message: `${text}${more}`,
        signature: list.map(f => `${f.id}=${sumBytes(f.bytes)}`).join(';'),
        autoClose: STATE_TOAST_AUTO_CLOSE,
        actions: [
          ...(fix ? [fix] : []),
          actions.openPanel(fix ? undefined : 'accent'),
          actions.dontWarnAgain(
            'warnOnFindings',
            trans.__('Turn off finding warnings in the settings')
          )
        ]
      };
    });
  };
  return {
    id: 'findings',
    policy: 'update',
    describes: 'state',
    onInventory: (model, _inventory, settings) => check(model, settings),
    onSettings: check
  };
}
