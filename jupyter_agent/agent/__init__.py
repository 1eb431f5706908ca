"""The agent: a turn loop over a model adapter, a saved conversation and tools.

``Agent(ChatModel(openai.OpenAI(), "gpt-4o-mini"), store=store).run(prompt)`` runs one
turn and returns a :class:`~jupyter_agent.agent.loop.TurnOutcome`. Importing this
package does nothing.
"""
