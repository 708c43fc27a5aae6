"""The playground's web page: gradio components wired to a `Playground`.

    Scene: seed, shapes, shared colours, family ─ change ─> the scene's first frame and its
           own instruction (typed over freely; unknown words marked as you type)
    Run ─> the episode streams in step by step: the frame with the readout's attention and
           the chunk's path, the attention figure of each query, the chunk, the status line
    Replay without language | image | state ─> the same episode with that input ablated
    After an episode: a slider shows any step again, a strip holds every frame, and the
    outcomes of the runs so far stay listed for comparison.

The element ids (`status`, `frames`, `step-picture`, ...) are what the browser test reads.
"""

from __future__ import annotations

import gradio as gr

from vla.envs.families import FAMILIES
from vla.envs.grammar import PAIRS
from vla.errors import UserError
from vla.eval.rollout import ABLATIONS
from vla.play.episode import Scene
from vla.play.session import Playground, View

HEAT = (
    "frame | readout's attention (last layer, head mean; bright: most attended) · cyan: the chunk"
)
HISTORY_KEPT = 8  # runs listed under "Outcomes"
# Drawing a scene, reading the words and showing a stored step use no policy: they run at
# once, also while an episode plays (the episodes share one queue: `concurrency_id="policy"`)
LIGHT = {"show_progress": "hidden", "concurrency_limit": None}


def build_page(playground: Playground, seed: int, title: str) -> gr.Blocks:
    """The page (not launched). `seed` is the first scene's; `title` names the checkpoint."""
    trained = playground.trained_env
    first = Scene(seed, trained["num_targets"], trained["shared_colours"], trained["families"][0])
    frame, drawn = playground.preview(first)
    with gr.Blocks(title="vla playground", analytics_enabled=False) as page:
        gr.Markdown(f"## vla playground · {title}")
        steps = gr.State(None)  # the last episode: (Steps, unknown words, ablated), for the slider
        history = gr.State([])  # one line per run
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                seed_box = gr.Number(first.seed, label="seed", precision=0, elem_id="seed")
                shapes = gr.Slider(1, len(PAIRS), first.num_targets, step=1, label="shapes")
                shared = gr.Checkbox(first.shared_colours, label="shared colours")
                family = gr.Dropdown(list(FAMILIES), value=first.family, label="family")
                instruction = gr.Textbox(
                    drawn, label="instruction (type any)", elem_id="instruction"
                )
                words = gr.HighlightedText(
                    playground.words(drawn), label="as the tokenizer reads it",
                    color_map={"unknown": "red", "dropped": "gray"}, elem_id="words",
                )  # fmt: skip
                run = gr.Button("Run", variant="primary", elem_id="run")
                with gr.Row():
                    replays = {
                        a: gr.Button(f"Replay without {a}", size="sm", elem_id=f"replay-{a}")
                        for a in ABLATIONS
                    }
                status = gr.Markdown(
                    "Pick a scene, type an instruction, press Run.", elem_id="status"
                )
                outcomes = gr.Markdown("", elem_id="outcomes")
            with gr.Column(scale=2):
                picture = gr.Image(
                    frame, label=HEAT, format="png", height=360, elem_id="step-picture"
                )
                slider = gr.Slider(
                    0, 1, 0, step=1, label="step", interactive=False, elem_id="slider"
                )
                chunk = gr.Markdown("", elem_id="chunk")
        gr.Markdown("**Attention of the query in effect**: every layer and head, and the words")
        figure = gr.Image(None, show_label=False, format="png", elem_id="figure")
        frames = gr.Gallery(
            label="every step", columns=10, height=220, format="png", elem_id="frames"
        )

        scene_inputs = [seed_box, shapes, shared, family]

        def scene_of(seed, shapes, shared, family) -> Scene:
            if seed is None or not 0 <= int(seed) < 2**31:
                raise gr.Error(f"seed={seed} must be an integer in [0, 2^31)")
            return Scene(int(seed), int(shapes), bool(shared), str(family))

        def draw(*values):
            try:
                frame, text = playground.preview(scene_of(*values))
            except UserError as e:
                raise gr.Error(str(e)) from None
            return frame, text, "Scene drawn: type over the instruction if you like, press Run."

        for control in scene_inputs:
            control.change(draw, scene_inputs, [picture, instruction, status], **LIGHT)
        instruction.change(playground.words, instruction, words, **LIGHT)

        def outputs(view: View, *rest):
            figure_update = gr.skip() if view.figure is None else view.figure
            return (view.picture, figure_update, view.chunk, view.status, *rest)

        def episode(ablate: tuple[str, ...], *values):
            *scene_values, text, _, lines = values
            scene, shown, strip = scene_of(*scene_values), [], []
            keep = (gr.skip(),) * 5  # the slider, strip and states change at the end only
            try:
                for view in playground.run(scene, text, ablate):
                    shown.append(view.step)
                    strip.append(view.step.frame)
                    if not view.step.done:
                        yield outputs(view, *keep)
            except UserError as e:
                raise gr.Error(str(e)) from None
            end = view.step
            lines = [outcome_line(scene, end, ablate), *lines][:HISTORY_KEPT]
            yield outputs(
                view,
                gr.Slider(0, end.t, end.t, step=1, interactive=True),
                strip,
                (shown, view.unknown, ablate),
                lines,
                "**Outcomes** (newest first)\n\n" + "\n".join(f"- {x}" for x in lines),
            )

        def episode_with(ablate: tuple[str, ...]):
            def handler(*values):
                yield from episode(ablate, *values)

            return handler

        run_inputs = [*scene_inputs, instruction, steps, history]
        views = [picture, figure, chunk, status, slider, frames, steps, history, outcomes]
        run.click(episode_with(()), run_inputs, views, concurrency_id="policy")
        for name, button in replays.items():
            button.click(episode_with((name,)), run_inputs, views, concurrency_id="policy")

        def show(t, kept):
            if not kept:
                return (gr.skip(),) * 4
            shown, unknown, ablate = kept
            view = playground.view(shown[min(int(t), len(shown) - 1)], unknown, ablate)
            return view.picture, view.figure, view.chunk, view.status

        slider.input(
            show, [slider, steps], [picture, figure, chunk, status], trigger_mode="always_last",
            **LIGHT,
        )  # fmt: skip
    return page


def outcome_line(scene: Scene, step, ablate) -> str:
    """One run in the Outcomes list: its scene, instruction, ablation and result."""
    result = "success" if step.success else "no success"
    without = f" without {'+'.join(ablate)}" if ablate else ""
    return f'seed {scene.seed}, "{step.instruction}"{without}: **{result}** in {step.t} steps'
