# @NAME@: Python packages the training needs (pip install -r requirements.txt)
