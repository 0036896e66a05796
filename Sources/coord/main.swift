print("coord")
