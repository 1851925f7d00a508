print("horizon-fuzz: not written yet")
