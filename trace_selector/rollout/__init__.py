"""Rollout: search agents run K times per question through vLLM, written to a resumable pool.

Nothing here imports PyG or Lightning; rollout meets the selector only at the pool file.
"""
