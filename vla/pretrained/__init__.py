"""A trained policy as the field shares one: a folder of config.json, model.safetensors and a
model card, read and written without Hydra or Lightning (`vla.pretrained.mixin` puts
`from_pretrained` / `save_pretrained` / `select_action` on the policy).

    mixin   from_pretrained / save_pretrained / select_action, VLAPolicy's (and the VLM's)
    folder  config.json, model.safetensors, README.md: written atomically, read as data only
    card    the model card: Hub front matter, training facts, success with its interval
    hub     Hub ids through huggingface_hub (the `hub` extra): download and push
    run     a run's <run>/pretrained_model/, and `scripts/export.py format=pretrained`
"""
