print("horizon-bench: not written yet")
