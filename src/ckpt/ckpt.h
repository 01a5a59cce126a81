/*
 * ckpt.h -- checkpoint discovery for resume.
 *
 * What counts as a checkpoint here: any entry of the checkpoint directory
 * (file or folder) whose name does not start with '.' and does not hold
 * ".tmp" or ".partial" (the names of saves in progress).  The newest by
 * modification time wins.  Scripts save atomically (write a temporary name,
 * then rename), which is what makes "newest complete" the newest entry.
 */
#ifndef TC_CKPT_H
#define TC_CKPT_H

/* Newest checkpoint in dir as an absolute heap path, or NULL if none. */
char *ckpt_find_latest(const char *dir);

#endif
