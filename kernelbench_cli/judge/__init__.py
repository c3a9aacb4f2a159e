"""The trusted side: the reference process (process.py) that owns the problem, the inputs, the clocks and
the verdict, and its hold on the candidate processes it judges (handle.py, sides.py, session.py)."""
