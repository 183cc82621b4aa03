mod grounding;
