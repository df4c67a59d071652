// TODO(chat_format): being written
