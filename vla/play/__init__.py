"""The playground: a local web page to pick a scene, type an instruction and watch the policy
act on it, step by step, with its attention, its action chunk and replays with an input
ablated (`python scripts/play.py ckpt_path=RUN`, `vla-play`; docs/playground.md).

    episode.py   one episode as Steps, run by PolicyRunner (no gradio)
    pictures.py  what a step looks like: frame + heat + chunk path, attention figure, text
    session.py   the page's actions as plain Python (Playground)
    page.py      the gradio components wired to them
    serve.py     play(cfg): load the checkpoint, build the page, serve it
"""
