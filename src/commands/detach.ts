/**
 * Detach Autograd Graphs…: replace the tensors with a grad_fn in a graph
 * holder (a user variable keeping autograd graphs) by `tensor.detach()`.
 */
import { Notification } from '@jupyterlab/apputils';
import { formatBytes, sumBytes } from '../analysis/format';
import { canFixGraph, generateDetachCell } from '../analysis/graphs';
import type { IGraphHolder } from '../protocol';
import { CommandIDs } from '../tokens';
import { graphArgs } from './args';
import type { ICommandContext } from './context';

/** The kernel model's notebook and the graph holder named by `args.name`. */
function graphTarget(
  ctx: ICommandContext,
  args: { kernelId?: unknown; name?: unknown }
) {
  const model = ctx.modelFor(args);
  const panel = model ? ctx.monitor.panelFor(model) : null;
  const graph =
    model?.inventory?.graphs.find(g => g.name === args.name) ?? null;
  return { panel, graph };
}

/** Say why `graph` cannot be fixed: it is gone, or not a plain name holding its tensors. */
function cannotFix(ctx: ICommandContext, graph: IGraphHolder | null): void {
  const { trans } = ctx;
  Notification.warning(
    graph
      ? trans.__(
          'That variable cannot be fixed from here: it is not a plain Python name holding the tensors itself.'
        )
      : trans.__(
          'That variable no longer keeps autograd graphs; the VRAM panel shows the latest inventory.'
        ),
    { autoClose: 5000 }
  );
}

/** Ask whether to detach the tensors of `graph`. */
function confirmDetach(
  ctx: ICommandContext,
  graph: IGraphHolder
): Promise<boolean> {
  const { trans } = ctx;
  return ctx.confirm(
    trans.__('Detach the tensors in %1?', graph.name),
    trans.__(
      'A cell is inserted below the active cell that replaces each tensor with a grad_fn directly in %1 by tensor.detach(): the values stay, the autograd graphs (%2) are freed. You can no longer call backward() through them. Next time store loss.item() or loss.detach(), or run evaluation under torch.no_grad().',
      graph.name,
      formatBytes(sumBytes(graph.bytes))
    ),
    trans.__('Detach')
  );
}

/** Register Detach Autograd Graphs…. */
export function addDetachCommand(ctx: ICommandContext): void {
  const { trans } = ctx;
  ctx.commands.addCommand(CommandIDs.fixGraphHolder, {
    label: trans.__('Detach Autograd Graphs…'),
    caption: trans.__(
      'Ask, then insert and run a cell that replaces the tensors with a grad_fn in this variable by tensor.detach(): same values, no graph'
    ),
    describedBy: graphArgs,
    isEnabled: args => {
      const { panel, graph } = graphTarget(ctx, args);
      return !!panel && !!graph && canFixGraph(graph);
    },
    execute: async args => {
      const { panel, graph } = graphTarget(ctx, args);
      const code = graph ? generateDetachCell(graph) : null;
      if (!panel || !graph || code === null) {
        cannotFix(ctx, graph);
        return false;
      }
      if (!(await confirmDetach(ctx, graph))) {
        return false;
      }
      await ctx.insert(panel, code, {
        tag: 'gpu-hygiene-detach-graphs',
        key: `detach-graphs:${graph.name}`
      });
      return true;
    }
  });
}
