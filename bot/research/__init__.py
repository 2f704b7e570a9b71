"""Deep research: Claude searches the archive with tools before it answers.

``loop`` runs the tool loop (``Researcher``), ``tools`` carries out the tool calls and
numbers what they find, ``schema`` defines and validates the tools' inputs, ``prompts``
holds what Claude is told, ``trace`` records the steps for the session store.
"""
