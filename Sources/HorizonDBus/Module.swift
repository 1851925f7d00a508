// HorizonDBus: being written (issue 5, D-Bus layer).
