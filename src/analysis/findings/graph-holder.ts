/**
 * Graph holder: a user variable that keeps autograd graphs alive
 * (`losses.append(loss)`), from `inventory.graphs` with the thresholds of
 * `../memory/graph-holders.ts`: warning at ≥ `GRAPH_WARN_BYTES` (64 MiB) on one
 * CUDA device, else info; none below `GRAPH_FIX_MIN_BYTES` (1 MiB: a few scalar
 * losses, harmless). Fix: "Fix…" (ask, then detach) where `canFixGraph` allows
 * it, else no button. A holder fed by a forward hook (`hooks`) says on
 * which module; its Fix… also removes that hook. Its toast stays the graph-holder rule's
 * (`notifications/graph-toast.ts`).
 */
import { formatBytes } from '../format';
import {
  GRAPH_FIX_MIN_BYTES,
  graphRows,
  GRAPH_WARN_BYTES
} from '../memory/graph-holders';
import type { FindingRule, IFinding } from './types';

/** The graph-holder rule: one finding per graph holder. */
export const graphHolderRule: FindingRule = ({ inventory }) =>
  graphRows(inventory)
    .filter(row => row.bytes >= GRAPH_FIX_MIN_BYTES)
    .map((row): IFinding => ({
      kind: 'graph-holder',
      id: `graph-holder:${row.graph.name}`,
      severity: row.deviceBytes >= GRAPH_WARN_BYTES ? 'warning' : 'info',
      subject: row.graph.path,
      bytes: { ...row.graph.bytes },
      explain: trans =>
        row.graph.hooks?.length
          ? trans._n(
              '%2 keeps %1 autograd graph alive (%3%4), appended by a forward hook on %5: run the model under torch.no_grad(), or store output.detach() in the hook. Fix… detaches them and removes the hook.',
              '%2 keeps %1 autograd graphs alive (%3%4), appended by a forward hook on %5: run the model under torch.no_grad(), or store output.detach() in the hook. Fix… detaches them and removes the hook.',
              row.graph.count,
              row.graph.path,
              row.graph.truncated ? '≥ ' : '~',
              formatBytes(row.bytes),
              row.graph.hooks.map(h => h.module).join(', ')
            )
          : trans._n(
              '%2 keeps %1 autograd graph alive (%3%4): store loss.item() or loss.detach(), or run evaluation under torch.no_grad().',
              '%2 keeps %1 autograd graphs alive (%3%4): store loss.item() or loss.detach(), or run evaluation under torch.no_grad().',
              row.graph.count,
              row.graph.path,
              row.graph.truncated ? '≥ ' : '~',
              formatBytes(row.bytes)
            ),
      evidence: [
        row.graph.path,
        `${row.graph.gradFn} ×${row.graph.count}`,
        ...(row.graph.hooks ?? []).map(
          h => `${h.module}._forward_hooks[${h.key}]`
        )
      ],
      fix: row.fixable
        ? { kind: 'detach', name: row.graph.name }
        : { kind: 'none' }
    }));
