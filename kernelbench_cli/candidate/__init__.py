"""The untrusted side: the candidate process (process.py) and load_inline interception (loading.py)."""
