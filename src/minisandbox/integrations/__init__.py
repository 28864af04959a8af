"""Use minisandbox inside agent and RL tools without forking them.

* `minisandbox.integrations.swerex` - a SWE-ReX `AbstractDeployment` / `AbstractRuntime`
  (pip install 'minisandbox[swerex]');
* `minisandbox.integrations.minisweagent` - a mini-swe-agent environment class, named by
  dotted path in its config (pip install 'minisandbox[minisweagent]');
* `minisandbox.integrations.minisweagent_batch` - mini-swe-agent's SWE-bench batch runner
  over minisandbox environments (the `minisandbox-mini-batch` script);
* `minisandbox.integrations.ray` - rollouts across a Ray cluster: a sandbox pool per node,
  the I/O budget as the `minisandbox_io` resource (pip install 'minisandbox[ray]');
* `minisandbox.task` - what they share: a task's sandbox in its start state
  (`open_task`) and grading in a fresh sandbox (`grade`).

The tool-specific modules import their tool; this package and `task` do not.

May import: anything below it (`minisandbox.task`, the subsystems, the contracts); never
the CLI.
"""

from minisandbox.task import TaskSandbox, grade, open_task, task_ids

__all__ = ["TaskSandbox", "grade", "open_task", "task_ids"]
