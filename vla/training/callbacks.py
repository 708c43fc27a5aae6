"""Training callbacks: closed-loop rollout evaluation, logged to the run's loggers."""

from __future__ import annotations

import logging
import time

import lightning as L
from lightning.pytorch.utilities.exceptions import SIGTERMException

from vla.data.seeds import SELECTION_SEED_START, check_seeds
from vla.envs.config import env_kwargs_of
from vla.envs.reach import ReachEnv
from vla.errors import ConfigError
from vla.eval.attention import episode_attention_figures
from vla.eval.rollout import rollout
from vla.eval.stats import format_summary
from vla.eval.video import annotate, shrink
from vla.keys import IMAGE, INSTRUCTION, STATE
from vla.training.media import log_gif, log_image, takes_media
from vla.training.stop_at_step import StoppedAtStep

log = logging.getLogger(__name__)
GIF_WIDTH = 160  # px: small event files, the caption still legible


class RolloutEval(L.Callback):
    """Rolls the policy out in the env at every `every_n_validations`-th validation and logs
    `eval/success_rate` and `eval/mean_steps`, so checkpoints can be chosen by success; plus
    `record` episodes as animated GIFs and the readout's attention map as TensorBoard images.
    How often validation runs is the trainer's `val_check_interval` (the recipe validates
    every N optimisation steps, so curves resolve minutes, not epochs).

    `history` keeps every evaluation as {"step", "time" (unix seconds), "success_rate",
    "num_episodes"}: the learning curve that `train` writes to metrics.json (with 95% intervals)
    and `scripts/study.py` plots.

    Args:
        env: the env config to evaluate in (kwargs of ReachEnv).
        num_episodes: episodes per evaluation.
        seed: first episode seed, in the checkpoint-selection range (`vla.data.seeds`): the
            best checkpoint is chosen on episodes that are neither demonstrations nor tests.
        num_envs: envs stepped together (batched inference).
        every_n_validations: evaluate at every n-th validation.
        record: episodes whose frames are logged.
        confirm_above: a success rate above this (the early-stopping threshold) is
            confirmed on `confirm_episodes` more selection episodes, and the rate over all of
            them is what is logged: one estimate of 100 episodes at the threshold is
            optimistic by the selection itself (a policy at 96% passes 99 of 100 one time in
            twelve), so a run stops on a rate that holds on fresh episodes. None: never.
        confirm_episodes: episodes of the confirmation round, after the first block's seeds.
    """

    def __init__(
        self,
        env,
        num_episodes: int = 100,
        seed: int = SELECTION_SEED_START,
        num_envs: int = 50,
        every_n_validations: int = 1,
        record: int = 2,
        confirm_above: float | None = None,
        confirm_episodes: int = 200,
    ):
        if num_episodes < 1:
            raise ConfigError(f"callbacks.rollout_eval.num_episodes={num_episodes} must be >= 1")
        if every_n_validations < 1:
            raise ConfigError(
                f"callbacks.rollout_eval.every_n_validations={every_n_validations} must be >= 1"
            )
        if confirm_above is not None and confirm_episodes < 1:
            raise ConfigError(
                f"callbacks.rollout_eval.confirm_episodes={confirm_episodes} must be >= 1"
            )
        total = num_episodes + (confirm_episodes if confirm_above is not None else 0)
        check_seeds("selection", seed, total, "callbacks.rollout_eval.seed")
        self.confirm_above, self.confirm_episodes = confirm_above, confirm_episodes
        self.env_kwargs = env_kwargs_of(env)
        self.num_episodes, self.seed, self.num_envs = num_episodes, seed, num_envs
        self.every_n_validations, self.record = every_n_validations, record
        self.validations = 0
        self.last_success_rate, self.last_episodes = 0.0, num_episodes
        self.history: list[dict] = []

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule):
        if trainer.sanity_checking:
            return
        self.validations += 1
        # the best-checkpoint callback needs a measured value from the first validation on
        # (Lightning keeps the last logged value between evaluations)
        unmeasured = "eval/success_rate" not in trainer.callback_metrics
        if self.validations % self.every_n_validations == 0 or unmeasured:
            self._evaluate(trainer, pl_module)

    def _evaluate(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Rollouts on rank 0; every rank gets rank 0's success rate, so checkpointing by it
        agrees everywhere (every rank reaches this call at the same step)."""
        if trainer.is_global_zero:
            start = time.perf_counter()
            result = rollout(
                pl_module.policy,
                self.env_kwargs,
                self.num_episodes,
                self.seed,
                num_envs=self.num_envs,
                record=self.record,
            )
            metrics = result.metrics()
            self.last_success_rate, self.last_episodes = (
                metrics["success_rate"],
                len(result.success),
            )
            if self.confirm_above is not None and self.last_success_rate > self.confirm_above:
                self._confirm(pl_module.policy)
            pl_module.log("eval/mean_steps", metrics["mean_steps"], rank_zero_only=True)
            families = metrics["success_by_family"]
            for family, rate in families.items() if len(families) > 1 else ():
                pl_module.log(f"eval/family/{family}", rate["success_rate"], rank_zero_only=True)
            pl_module.log("eval/seconds", time.perf_counter() - start, rank_zero_only=True)
            self._log_frames(trainer, result, metrics, pl_module.policy)
        self.last_success_rate = trainer.strategy.broadcast(self.last_success_rate, src=0)
        self.last_episodes = trainer.strategy.broadcast(self.last_episodes, src=0)
        pl_module.log("eval/success_rate", self.last_success_rate, prog_bar=True)
        self.history.append(
            dict(
                step=trainer.global_step,
                time=time.time(),
                success_rate=self.last_success_rate,
                num_episodes=self.last_episodes,
            )
        )

    def _confirm(self, policy) -> None:
        """The confirmation round: `confirm_episodes` more selection episodes, pooled."""
        more = rollout(
            policy,
            self.env_kwargs,
            self.confirm_episodes,
            self.seed + self.num_episodes,
            num_envs=self.num_envs,
        )
        passed = self.last_success_rate * self.last_episodes + float(more.success.sum())
        self.last_episodes += self.confirm_episodes
        log.info(
            f"confirming: {int(more.success.sum())}/{self.confirm_episodes} more selection "
            f"episodes; {passed / self.last_episodes:.1%} of {self.last_episodes} in all"
        )
        self.last_success_rate = passed / self.last_episodes

    def _log_frames(self, trainer: L.Trainer, result, m: dict, policy) -> None:
        """The evaluation's record (`m`: its metrics): a log line, and in TensorBoard the
        recorded episodes as captioned GIFs (outcome marked on the last frame) and the
        readout's attention map."""
        families = m["success_by_family"]
        by_family = ", ".join(f"{k} {v['success_rate']:.0%}" for k, v in families.items())
        log.info(
            f"rollouts at step {trainer.global_step}: success "
            f"{format_summary(m)} episodes "
            f"(mean {m['mean_steps']:.1f} steps{'; ' + by_family if len(families) > 1 else ''})"
        )
        loggers = [logger for logger in trainer.loggers if takes_media(logger)]
        if loggers and result.frames:
            # where the readout looks at the start of the first recorded episode
            obs, _ = ReachEnv(**{**self.env_kwargs, "render_mode": "rgb_array"}).reset(
                seed=int(result.seeds[0])
            )
            batch = {k: obs[k][None] for k in (IMAGE, STATE)}
            batch[INSTRUCTION] = [obs[INSTRUCTION]]
            (figure,) = episode_attention_figures(policy, batch, [result.frames[0][0]])
            log_image(loggers, "attention/episode_0", figure, trainer.global_step)
            for i, frames in enumerate(result.frames):
                ok = bool(result.success[i])
                frames = annotate(shrink(frames, GIF_WIDTH), result.instructions[i], ok)
                log_gif(loggers, f"rollout/episode_{i}", frames, trainer.global_step)

    def state_dict(self) -> dict:
        return {
            "last_success_rate": float(self.last_success_rate),
            "validations": self.validations,
            "history": self.history,
        }

    def load_state_dict(self, state_dict: dict) -> None:
        self.last_success_rate = float(state_dict.get("last_success_rate", 0.0))
        self.validations = int(state_dict.get("validations", 0))
        self.history = list(state_dict.get("history", []))


class LastCheckpoint(L.Callback):
    """The one writer of `<dirpath>/last.ckpt`: every `every_n_train_steps` optimizer steps (so
    a crash loses at most that many), at the end of every epoch (so it holds the final weights
    when training ends), and when the run is stopped (Ctrl-C, SIGTERM) before Lightning shuts
    down, so `ckpt_path=<run>/checkpoints/last.ckpt` continues from the step where training
    stopped. A save on stopping that fails (a full disk) leaves the previous file whole
    (`AtomicCheckpointIO`) and its reason in `save_failed`."""

    def __init__(self, dirpath: str, every_n_train_steps: int = 200):
        if every_n_train_steps < 1:
            raise ConfigError(
                f"callbacks.last_checkpoint.every_n_train_steps={every_n_train_steps} must be >= 1"
            )
        self.path = f"{dirpath}/last.ckpt"
        self.every_n_train_steps = every_n_train_steps
        self.saved_on_interrupt: str | None = None
        self.save_failed: str | None = None
        self._saved_step: int | None = None  # a skipped batch leaves the step where it was

    def on_train_batch_end(self, trainer: L.Trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        if step > 0 and step % self.every_n_train_steps == 0 and step != self._saved_step:
            trainer.save_checkpoint(self.path, weights_only=False)
            self._saved_step = step

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule):
        trainer.save_checkpoint(self.path, weights_only=False)  # a full one: resume needs it
        self._saved_step = trainer.global_step

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception):
        # at step 0 (still collecting demonstrations, say) there is nothing to resume
        started = trainer.global_step > 0
        stopped = isinstance(exception, KeyboardInterrupt | SIGTERMException | StoppedAtStep)
        if stopped and trainer.state.fn == "fit" and started:
            try:
                trainer.save_checkpoint(self.path, weights_only=False)
            except (OSError, RuntimeError) as e:  # torch's writer raises RuntimeError
                self.save_failed = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
                return  # the run's last line says so, and which checkpoint to resume from
            self.saved_on_interrupt = self.path
